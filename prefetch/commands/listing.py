"""``prefetch list``: datasets known, and which are cached / partial."""

from __future__ import annotations

import json
from dataclasses import asdict

import click


@click.command("list")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Keras root to inspect.")
@click.option("--registry", "registries", multiple=True, type=click.Path(dir_okay=False), help="Extra registry TOML.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_datasets(cache_dir, registries, as_json):
    """Every known dataset and its local state: missing / partial N% / complete.

    \b
    Example (in a notebook cell):
      !prefetch list
    """
    from pathlib import Path

    from prefetch import cache
    from prefetch.layout import keras_root
    from prefetch.paths import config_dir
    from prefetch.registry import load_registry

    registry = load_registry(extra_files=[Path(r) for r in registries], config_dir=config_dir())
    root = keras_root(cache_dir=cache_dir)
    rows = cache.list_datasets(registry, root=root)
    if as_json:
        click.echo(json.dumps({"root": str(root), "datasets": [asdict(r) for r in rows]}, indent=2))
        return 0
    from prefetch.commands.output import echo_table

    click.echo(f"Keras cache: {root / 'datasets'}")
    table = [[r.name, r.state if r.percent is None else f"partial {r.percent:.0f}%", r.description] for r in rows]
    echo_table(["NAME", "STATE", "DESCRIPTION"], table,
               colour_of=lambda i, cell: ("green",) if i == 1 and cell == "complete" else
               ("yellow",) if i == 1 and cell.startswith("partial") else ())
    return 0
