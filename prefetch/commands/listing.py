"""``prefetch list``: datasets known, their local state and size on disk, partials with their age."""

from __future__ import annotations

import json
from dataclasses import asdict

import click


@click.command("list")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Keras root to inspect.")
@click.option("--registry", "registries", multiple=True, type=click.Path(dir_okay=False), help="Extra registry TOML.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_datasets(cache_dir, registries, as_json):
    """Every known dataset: missing / partial N% / complete, its size on disk, and the total; then Hugging Face repos.

    Partial downloads show their age (and "running" while a download holds them).

    \b
    Example (in a notebook cell):
      !prefetch list
    """
    from pathlib import Path

    from prefetch.operations import listing as cache
    from prefetch.cache.layout import keras_root
    from prefetch.fs.paths import config_dir, state_dir
    from prefetch.cache.registry import load_registry

    registry = load_registry(extra_files=[Path(r) for r in registries], config_dir=config_dir())
    root = keras_root(cache_dir=cache_dir)
    rows = cache.list_datasets(registry, root=root, state=state_dir())
    total = sum(r.bytes for r in rows)
    from prefetch.hf.cache_layout import scan_cache
    from prefetch.hf.names import hub_cache_root

    hub_root = hub_cache_root()
    repos = scan_cache(hub_root)
    if as_json:
        click.echo(json.dumps({"root": str(root), "total_bytes": total, "datasets": [asdict(r) for r in rows],
                               "hub": {"root": str(hub_root), "repos": [asdict(r) for r in repos]}}, indent=2))
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
    return 0
