"""``prefetch verify``: re-check the hashes of what is cached."""

from __future__ import annotations

import json
from dataclasses import asdict

import click


@click.command()
@click.argument("targets", nargs=-1, required=True, metavar="NAME|PATH...")
@click.option("--cache-dir", type=click.Path(file_okay=False),
              help="Keras root to check; for hf:// and ms:// names, that hub's cache (as `get --cache-dir` filled it).")
@click.option("--registry", "registries", multiple=True, type=click.Path(dir_okay=False), help="Extra registry TOML.")
@click.option("--root", type=click.Path(file_okay=False), help="torchvision:<Class> names: the datasets' root (default ./data).")
@click.option("--torch-hub", "torch_hub", is_flag=True, help="URL targets: checkpoints `get URL --torch-hub` placed.")
@click.option("-P", "--output-dir", "hub_dir", type=click.Path(file_okay=False),
              help="With --torch-hub: torch.hub's dir as `get --torch-hub -P DIR` set it (DIR/checkpoints).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def verify(targets, cache_dir, registries, root, torch_hub, hub_dir, as_json):
    """Re-hash cached datasets or files; exit 4 if any differs from its known hash.

    \b
    Examples (in a notebook cell):
      !prefetch verify cifar10
      !prefetch verify ~/.keras/datasets/mnist.npz
      !prefetch verify hf://ORG/NAME
      !prefetch verify torchvision:CIFAR10 --root ./data
      !prefetch verify torchvision:resnet50.IMAGENET1K_V1
      !prefetch verify https://host/ckpt/model-0123abcd.pth --torch-hub
      !prefetch verify https://host/ckpt/model-0123abcd.pth --torch-hub -P hubdir
      !prefetch verify ms://ORG/NAME
      !prefetch verify ms://ORG/NAME --cache-dir /data/ms    # as `get ms://ORG/NAME --cache-dir /data/ms` placed it
      !prefetch verify nltk:punkt_tab
    """
    from pathlib import Path

    from prefetch.errors import ExitCode
    from prefetch.cache.layout import keras_root
    from prefetch.fs.paths import config_dir
    from prefetch.cache.registry import load_registry

    if hub_dir is not None and not torch_hub:
        raise click.UsageError("-P is torch.hub's dir here: give it with --torch-hub")
    registry = load_registry(extra_files=[Path(r) for r in registries], config_dir=config_dir())
    tv_root, root = root, keras_root(cache_dir=cache_dir)
    results = [r for t in targets for r in _verify_one(t, registry, root, tv_root=tv_root, registries=registries,
                                                       torch_hub=torch_hub, hub_dir=hub_dir, cache_dir=cache_dir)]
    if as_json:
        click.echo(json.dumps([asdict(r) for r in results], indent=2))
    else:
        for r in results:
            detail = {
                "ok": f"{r.algorithm} ok",
                "mismatch": f"{r.algorithm} expected {r.expected}, got {r.got}",
                "missing": "not on disk",
                "unchecked": f"no known hash; sha256 {r.got}",
            }[r.state]
            click.echo(f"{r.state:9} {r.path}  {detail}")
    if any(r.state == "mismatch" for r in results):
        if any(t.startswith("hf://") for t in targets):
            click.echo("prefetch: error: hash mismatch; delete the blob the mismatching entry points to,"
                       " then `prefetch get` the repo again", err=True)
            return int(ExitCode.INTEGRITY)
        click.echo("prefetch: error: hash mismatch; run `prefetch get` again to replace the file", err=True)
        return int(ExitCode.INTEGRITY)
    if any(r.state == "missing" for r in results):
        click.echo("prefetch: error: some files are missing; run `prefetch get` to fetch them", err=True)
        return int(ExitCode.FAILURE)
    return 0


def _verify_one(target: str, registry, root, *, tv_root=None, registries=(), torch_hub=False, hub_dir=None,
                cache_dir=None):
    """A dataset or file under the Keras root, an hf:// or ms:// repo in its hub's cache (``cache_dir``
    when given, as ``get --cache-dir`` put it there), or a torchvision: name under --root (datasets)
    or torch.hub's checkpoints (weights)."""
    from prefetch.operations import listing as cache
    from prefetch.hf.names import is_hub_name

    from prefetch.cache.nltk_data import is_nltk_name

    if is_nltk_name(target):
        import os

        from prefetch.fs.paths import state_dir
        from prefetch.operations.nltk import verify_nltk

        return verify_nltk(target, env=os.environ, state=state_dir())
    if target[:12].lower() == "torchvision:" or (torch_hub and "://" in target):
        from prefetch.operations.torchvision import verify_torchvision

        return verify_torchvision(target, root=tv_root, registries=[str(r) for r in registries], torch_hub=torch_hub,
                                  hub_dir=hub_dir)

    if is_hub_name(target):
        from prefetch.hf.cache_layout import verify_repo
        from prefetch.hf.names import hub_cache_root, parse_hub_name

        return verify_repo(hub_cache_root(cache_dir=cache_dir).absolute(), parse_hub_name(target))
    from prefetch.ms.names import is_ms_name

    if is_ms_name(target):
        import os

        from prefetch.fs.paths import state_dir
        from prefetch.ms.names import ms_cache_root, parse_ms_name
        from prefetch.ms.records import verify_repo as verify_ms_repo

        return verify_ms_repo(ms_cache_root(os.environ, cache_dir).absolute(), state_dir(), parse_ms_name(target))
    return cache.verify_cached(target, registry, root=root)
