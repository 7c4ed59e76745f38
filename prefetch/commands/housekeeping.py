"""``prefetch rm`` and ``prefetch clean``: tidy the Keras cache."""

from __future__ import annotations

import json
from dataclasses import asdict

import click


def human_age(seconds: float) -> str:
    """90061 -> '1d 1h'; 3700 -> '1h 1m'; 42 -> '42s'."""
    seconds = int(seconds)
    for size, unit, next_size, next_unit in ((86400, "d", 3600, "h"), (3600, "h", 60, "m"), (60, "m", 1, "s")):
        if seconds >= size:
            rest = (seconds % size) // next_size
            return f"{seconds // size}{unit} {rest}{next_unit}" if rest else f"{seconds // size}{unit}"
    return f"{seconds}s"


def echo_result(result, *, as_json: bool, verb: str) -> None:
    """What was removed (or would be), the bytes, and what was left alone."""
    from prefetch.ui.render import human_bytes

    if as_json:
        data = {"dry_run": result.dry_run, "bytes": result.bytes, "removed": [asdict(r) for r in result.removed],
                "skipped": result.skipped, "not_ours": result.not_ours, "not_placed": result.not_placed}
        click.echo(json.dumps(data, indent=2))
        return
    from prefetch.commands.output import echo_table

    would = "would remove" if result.dry_run else "removed"
    rows = [[would, r.reason, human_bytes(r.bytes), r.path] for r in result.removed]
    rows += [["left", "busy", "", line] for line in result.skipped]
    rows += [["left", "not ours", "", line] for line in result.not_ours]
    rows += [["left", "not prefetch's", "", line] for line in result.not_placed]
    if rows:
        echo_table(["ACTION", "WHAT", "SIZE", "PATH"], rows, right=[2],
                   colour_of=lambda i, cell: ("yellow",) if i == 0 and cell == "left" else ())
    total = f"{len(result.removed)} path(s), {human_bytes(result.bytes)}"
    if not result.removed:
        click.echo(f"{verb}: nothing to remove")
    else:
        click.echo(f"{verb}: {would} {total}" + (" (dry run: nothing changed)" if result.dry_run else ""))


def _context(cache_dir, registries):
    from pathlib import Path

    from prefetch.cache.layout import keras_root
    from prefetch.fs.paths import config_dir, state_dir
    from prefetch.cache.registry import load_registry

    registry = load_registry(extra_files=[Path(r) for r in registries], config_dir=config_dir())
    return registry, keras_root(cache_dir=cache_dir), state_dir()


def hub_roots(cache_dir) -> dict:
    """``hub_root`` and ``ms_root`` for ``remove_datasets``/``clean_cache``: ``--cache-dir`` is also
    the hf:// and ms:// caches, as ``get --cache-dir`` fills them (without it: the environment's)."""
    if not cache_dir:
        return {}
    from prefetch.hf.names import hub_cache_root
    from prefetch.ms.names import ms_cache_root

    return {"hub_root": hub_cache_root(cache_dir=cache_dir).absolute(),
            "ms_root": ms_cache_root({}, cache_dir).absolute()}


@click.command("rm")
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="Keras root to tidy; for hf:// and ms:// names, that hub's cache (as `get --cache-dir` filled it).")
@click.option("--registry", "registries", multiple=True, type=click.Path(dir_okay=False), help="Extra registry TOML.")
@click.option("--root", type=click.Path(file_okay=False), help="torchvision:<Class> names: the datasets' root (default ./data).")
@click.option("--torch-hub", "torch_hub", is_flag=True, help="URL names: checkpoints `get URL --torch-hub` placed.")
@click.option("-P", "--output-dir", "hub_dir", type=click.Path(file_okay=False),
              help="With --torch-hub: torch.hub's dir as `get --torch-hub -P DIR` set it (DIR/checkpoints).")
@click.option("-n", "--dry-run", is_flag=True, help="Show what would be removed; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rm(names, cache_dir, registries, root, torch_hub, hub_dir, dry_run, as_json):
    """Remove datasets from the cache: archives, their other names, extracted folders, partials;
    hf:// and ms:// repos; and what prefetch placed for torchvision: names and --torch-hub URLs.

    A dataset that is being downloaded right now is left alone (exit 1); links are
    removed as links, never followed. Under a torchvision --root and in torch.hub's
    checkpoints only files prefetch placed go; any other file there is named and left.

    \b
    Examples (in a notebook cell):
      !prefetch rm cifar100
      !prefetch rm cifar10 imdb --dry-run
      !prefetch rm hf://ORG/NAME              # a Hugging Face repo's whole cache folder
      !prefetch rm hf://ORG/NAME@REVISION     # one revision, and the blobs only it uses
      !prefetch rm ms://ORG/NAME              # a ModelScope repo
      !prefetch rm ms://ORG/NAME --cache-dir /data/ms   # ... that `get ms://ORG/NAME --cache-dir /data/ms` placed
      !prefetch rm torchvision:CIFAR10 --root data
      !prefetch rm torchvision:resnet50       # its default weights from torch.hub's checkpoints
      !prefetch rm https://host/ckpt/model-0123abcd.pth --torch-hub
      !prefetch rm https://host/ckpt/model-0123abcd.pth --torch-hub -P hubdir
      !prefetch rm nltk:punkt_tab             # the zip and its folder in NLTK's data dir
    """
    from prefetch.errors import ExitCode
    from prefetch.operations.housekeeping import remove_datasets

    if hub_dir is not None and not torch_hub:
        raise click.UsageError("-P is torch.hub's dir here: give it with --torch-hub")
    registry, keras, state = _context(cache_dir, registries)
    import os

    from prefetch.cache.nltk_data import is_nltk_name

    nltk_names = [n for n in names if is_nltk_name(n)]
    result = remove_datasets([n for n in names if not is_nltk_name(n)], registry, root=keras, state=state,
                             dry_run=dry_run, env=os.environ, torchvision_root=root,
                             registry_files=[str(r) for r in registries], torch_hub=torch_hub, hub_dir=hub_dir,
                             **hub_roots(cache_dir))
    if nltk_names:
        from prefetch.operations.nltk import remove_nltk

        remove_nltk(nltk_names, result, env=os.environ, state=state, dry_run=dry_run)
    echo_result(result, as_json=as_json, verb="rm")
    if result.skipped:
        click.echo("prefetch: error: some files are being downloaded and were left alone; "
                   "`prefetch cancel` their job first", err=True)
        return int(ExitCode.FAILURE)
    if result.not_ours:
        click.echo(f"prefetch: error: {result.not_ours[0].split(': ')[0]} (and {len(result.not_ours) - 1} more) "
                   "belongs to another user of this shared cache and was left alone", err=True)
        return int(ExitCode.FILESYSTEM)
    return 0


@click.command("clean")
@click.option("--older-than", "older_than", default="7d", show_default=True, metavar="AGE",
              help="Partial downloads last written longer ago than this (7d, 12h, 30m, 0).")
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="Keras root to tidy, and the hf:// and ms:// caches `get --cache-dir` fills there.")
@click.option("--root", type=click.Path(file_okay=False),
              help="A torchvision datasets' root to tidy too (default ./data, when it exists).")
@click.option("-n", "--dry-run", is_flag=True, help="Show what would be removed; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def clean(older_than, cache_dir, root, dry_run, as_json):
    """Remove stale partial downloads and what killed runs left behind.

    Partials (.part) older than --older-than whose download is not running (in the Keras
    cache, hf:// repos' blobs/, ModelScope's cache, torch.hub's checkpoints and the folders
    torchvision datasets use under --root), temp files and folders of interrupted
    extractions, and lock files (.part.lock) killed runs left; prints each with its size.

    \b
    Examples (in a notebook cell):
      !prefetch clean --dry-run
      !prefetch clean --older-than 1d
      !prefetch clean --root data --older-than 0
    """
    from prefetch.operations.housekeeping import clean_cache, parse_age, torch_ms_places

    age = parse_age(older_than)
    _registry, keras, state = _context(cache_dir, ())
    roots = hub_roots(cache_dir)
    result = clean_cache(root=keras, state=state, older_than=age, dry_run=dry_run, hub_root=roots.get("hub_root"),
                         **torch_ms_places(root, ms_root=roots.get("ms_root")))
    echo_result(result, as_json=as_json, verb="clean")
    return 0
