"""``prefetch list``: datasets known, their local state and size on disk, partials with their age."""

from __future__ import annotations

import json
import os
from dataclasses import asdict

import click


@click.command("list")
@click.argument("names", nargs=-1, metavar="[torchvision:NAME|ms://REPO|nltk:ID...]")
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="Keras root to inspect, and the hf:// and ms:// caches `get --cache-dir` fills there.")
@click.option("--registry", "registries", multiple=True, type=click.Path(dir_okay=False), help="Extra registry TOML.")
@click.option("--root", type=click.Path(file_okay=False), help="torchvision datasets' root (default ./data).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_datasets(names, cache_dir, registries, root, as_json):
    """Every known dataset: missing / partial N% / complete, its size on disk, and the total; then
    Hugging Face and ModelScope repos, torchvision datasets under --root, torch.hub's checkpoints
    and NLTK packages.

    Partial downloads show their age (and "running" while a download holds them). With
    torchvision:, ms:// or nltk: names, only those (exit 1 unless all are complete). With --cache-dir DIR,
    DIR's Keras datasets, hf:// repos and ms:// repos, as `get ... --cache-dir DIR` put them there.

    \b
    Examples (in a notebook cell):
      !prefetch list
      !prefetch list torchvision:CIFAR10 --root data
      !prefetch list torchvision:resnet50
      !prefetch list ms://ORG/NAME
      !prefetch list --cache-dir /data/cache   # what `get ... --cache-dir /data/cache` placed
      !prefetch list nltk:punkt_tab nltk:stopwords
    """
    if names:
        return _list_named(names, root=root, registries=registries, as_json=as_json, cache_dir=cache_dir)
    from pathlib import Path

    from prefetch.operations import listing as cache
    from prefetch.cache.layout import keras_root
    from prefetch.fs.paths import config_dir, state_dir
    from prefetch.cache.registry import load_registry

    registry = load_registry(extra_files=[Path(r) for r in registries], config_dir=config_dir())
    tv_root, root = root, keras_root(cache_dir=cache_dir)
    rows = cache.list_datasets(registry, root=root, state=state_dir())
    total = sum(r.bytes for r in rows)
    from prefetch.hf.cache_layout import scan_cache
    from prefetch.hf.names import hub_cache_root

    hub_root = hub_cache_root(cache_dir=cache_dir).absolute()
    repos = scan_cache(hub_root)
    ms_root, ms_rows, torch_rows = _ms_and_torch(root=tv_root, registries=registries, cache_dir=cache_dir)
    if as_json:
        click.echo(json.dumps({"root": str(root), "total_bytes": total, "datasets": [asdict(r) for r in rows],
                               "hub": {"root": str(hub_root), "repos": [asdict(r) for r in repos]},
                               "modelscope": {"root": str(ms_root), "repos": [asdict(r) for r in ms_rows]},
                               "torch": [asdict(r) for r in torch_rows],
                               "nltk": _nltk_json(*_nltk_rows(()))}, indent=2))
        return 0
    from prefetch.commands.housekeeping import human_age
    from prefetch.commands.output import echo_table
    from prefetch.ui.render import human_bytes

    click.echo(f"Keras cache: {root / 'datasets'}")
    table = []
    for r in rows:
        state = r.state if r.percent is None else f"partial {r.percent:.0f}%"
        partial = ", ".join("running" if p.active else f"{human_age(p.age)} old" for p in r.partials)
        table.append([r.name, state, human_bytes(r.bytes) if r.bytes else "-", partial, r.description])
    echo_table(["NAME", "STATE", "ON DISK", "PARTIAL", "DESCRIPTION"], table, right=[2],
               colour_of=lambda i, cell: ("green",) if i == 1 and cell == "complete" else
               ("yellow",) if i == 1 and cell.startswith("partial") else ())
    used = sum(1 for r in rows if r.bytes)
    click.echo(f"total: {human_bytes(total)} on disk for {used} dataset(s)")
    if repos:
        from prefetch.fs.files import mib

        click.echo(f"Hugging Face cache: {hub_root}")
        table = [[r.name, r.state, f"{r.files} files, {mib(r.size)}" + (f", {mib(r.partial)} in flight" if r.partial else ""),
                  ", ".join(f"{ref}={commit[:10]}" for ref, commit in r.revisions.items()) or "no ref"]
                 for r in repos]
        echo_table(["REPO", "STATE", "FILES", "REFS"], table,
                   colour_of=lambda i, cell: ("green",) if i == 1 and cell == "complete" else
                   ("yellow",) if i == 1 and cell == "partial" else ())
    _echo_ms(ms_root, ms_rows)
    _echo_torch(torch_rows)
    _echo_nltk(*_nltk_rows(()))
    return 0


def _ms_and_torch(*, root, registries, names=(), cache_dir=None):
    import os

    from prefetch.fs.paths import state_dir
    from prefetch.ms.names import ms_cache_root
    from prefetch.operations.modelscope import list_ms_repos
    from prefetch.operations.torchvision import is_torchvision_name, list_torchvision

    ms_root = ms_cache_root(os.environ, cache_dir).absolute()
    ms_rows = list_ms_repos(ms_root, state_dir())
    tv = [n for n in names if is_torchvision_name(n)]
    torch_rows = list_torchvision(tv, root=root, registries=[str(r) for r in registries], state=state_dir()) \
        if tv or not names else []
    return ms_root, ms_rows, torch_rows


def _list_named(names, *, root, registries, as_json, cache_dir=None):
    """``prefetch list torchvision:CIFAR10 ms://ORG/NAME``: those names only; exit 1 if any is not complete."""
    from prefetch.errors import UsageError
    from prefetch.ms.names import is_ms_name, parse_ms_name
    from prefetch.cache.nltk_data import is_nltk_name
    from prefetch.operations.torchvision import is_torchvision_name

    odd = [n for n in names if not is_torchvision_name(n) and not is_ms_name(n) and not is_nltk_name(n)]
    if odd:
        raise UsageError(f"{odd[0]}: `prefetch list NAME` takes torchvision:, ms:// and nltk: names "
                         "(plain `prefetch list` shows every Keras dataset and hf:// repo)")
    nltk_dir, nltk_rows = _nltk_rows([n for n in names if is_nltk_name(n)])
    ms_root, ms_rows, torch_rows = _ms_and_torch(root=root, registries=registries, names=names, cache_dir=cache_dir)
    wanted = {parse_ms_name(n).label for n in names if is_ms_name(n)}
    ms_rows = [r for r in ms_rows if r.name in wanted]
    for label in sorted(wanted - {r.name for r in ms_rows}):
        from prefetch.operations.modelscope import MsRepoState

        ms_rows.append(MsRepoState(name=label, path="", state="missing"))
    if as_json:
        click.echo(json.dumps({"modelscope": {"root": str(ms_root), "repos": [asdict(r) for r in ms_rows]},
                               "torch": [asdict(r) for r in torch_rows], "nltk": _nltk_json(nltk_dir, nltk_rows)},
                              indent=2))
    else:
        _echo_ms(ms_root, ms_rows)
        _echo_torch(torch_rows)
        _echo_nltk(nltk_dir, nltk_rows)
    return 0 if all(r.state == "complete" for r in [*ms_rows, *torch_rows, *nltk_rows]) else 1


def _nltk_rows(names):
    from prefetch.fs.paths import state_dir
    from prefetch.operations.nltk import list_nltk

    return list_nltk(list(names), env=os.environ, state=state_dir())


def _nltk_json(data_dir, rows) -> dict:
    return {"root": str(data_dir), "packages": [asdict(r) for r in rows]}


def _echo_nltk(data_dir, rows) -> None:
    if not rows:
        return
    from prefetch.commands.output import echo_table
    from prefetch.ui.render import human_bytes

    click.echo(f"NLTK data: {data_dir}")
    echo_table(["PACKAGE", "STATE", "ON DISK", "ZIP"],
               [[r.name, r.state, human_bytes(r.bytes) if r.bytes else "-", r.path] for r in rows], right=[2],
               colour_of=lambda i, cell: ("green",) if i == 1 and cell == "complete" else
               ("yellow",) if i == 1 and cell in ("partial", "zip only", "unverified") else ())


def _echo_ms(ms_root, rows) -> None:
    if not rows:
        return
    from prefetch.commands.output import echo_table
    from prefetch.fs.files import mib

    click.echo(f"ModelScope cache: {ms_root}")
    echo_table(["REPO", "STATE", "FILES"],
               [[r.name, r.state, f"{r.files} files, {mib(r.bytes)}" + (f", {mib(r.partial)} in flight" if r.partial else "")]
                for r in rows],
               colour_of=lambda i, cell: ("green",) if i == 1 and cell == "complete" else
               ("yellow",) if i == 1 and cell in ("partial", "unverified") else ())


def _echo_torch(rows) -> None:
    if not rows:
        return
    from prefetch.commands.housekeeping import human_age
    from prefetch.commands.output import echo_table
    from prefetch.ui.render import human_bytes

    click.echo("torchvision datasets and torch.hub checkpoints:")
    table = [[r.name, r.kind, r.state, human_bytes(r.bytes) if r.bytes else "-",
              "running" if r.active else (f"{human_age(r.partial_age)} old" if r.partial_age is not None else ""),
              os.path.commonpath(r.paths) if r.paths else ""] for r in rows]
    echo_table(["NAME", "KIND", "STATE", "ON DISK", "PARTIAL", "WHERE"], table, right=[3],
               colour_of=lambda i, cell: ("green",) if i == 2 and cell == "complete" else
               ("yellow",) if i == 2 and cell == "partial" else ())
