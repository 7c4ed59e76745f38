"""``prefetch mirror``: list, show, bench, use NAME|fastest, restore."""

from __future__ import annotations

import json
from dataclasses import asdict, is_dataclass
from enum import Enum
from pathlib import Path

import click


class Deadline(click.FloatRange):
    """Seconds, at least 0.1 and finite: ``nan`` slips through a range check, ``inf`` never ends."""

    def convert(self, value, param, ctx):
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a number of seconds (give e.g. 8)", param, ctx)
        return number


DEADLINE = Deadline(min=0.1, max=86400)  # (past a day: more than a wait's timeout holds)


# -- rendering (shared with `prefetch doctor`) ------------------------------
def render_table(headers: list[str], rows: list[list[str]], *, title: str | None = None) -> None:
    """Aligned columns as wide as their widest cell (URLs whole on one line), colour by NO_COLOR rules."""
    from prefetch.commands.output import echo_table

    from prefetch.commands.error_line import hide_passwords

    status = [i for i, h in enumerate(headers) if h in ("STATUS", "STATE")]
    rows = [[hide_passwords(str(cell)) for cell in row] for row in rows]
    echo_table(headers, rows, title=title, state_columns=status)


def warn(message: str) -> None:
    """One warning line on stderr."""
    click.echo(f"prefetch: warning: {message}", err=True)


def echo_json(data: object) -> None:
    """Dataclasses, enums and paths as JSON on stdout (passwords in URLs as ``***``)."""
    from prefetch.commands.error_line import hide_passwords

    click.echo(hide_passwords(json.dumps(to_jsonable(data), indent=2)))


def to_jsonable(value: object) -> object:
    if is_dataclass(value) and not isinstance(value, type):
        return {k: to_jsonable(v) for k, v in asdict(value).items()}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def _dirs() -> tuple[Path, Path]:
    from prefetch.fs.paths import config_dir, state_dir

    return config_dir(), state_dir()


def _rate(bps: float | None) -> str:
    from prefetch.ui.render import human_bytes

    return f"{human_bytes(bps)}/s" if bps else "-"


# -- commands ---------------------------------------------------------------
@click.group()
def mirror() -> None:
    """Package mirrors for pip, uv, conda and Hugging Face.

    \b
    Examples (in a notebook cell):
      !prefetch mirror list                 # the catalog
      !prefetch mirror bench                # throughput + latency of every mirror
      !prefetch mirror use fastest          # pip now uses the fastest mirror
      !prefetch mirror use tuna --tool all  # pip, uv, conda (and hf where the mirror has one)
      !prefetch mirror show                 # what pip/uv/conda/HF will really use
      !prefetch mirror restore              # undo the last `use`, byte for byte
    """


@mirror.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_mirrors(as_json: bool) -> None:
    """The mirror catalog (built-in plus your mirrors.toml)."""
    from prefetch.mirrors.catalog import load_catalog

    config, _ = _dirs()
    catalog = load_catalog(config_dir=config)
    if as_json:
        echo_json(
            {
                "mirrors": list(catalog.mirrors.values()),
                "datasets": list(catalog.datasets.values()),
                "files": catalog.files,
                "user_file": catalog.user_file,
            }
        )
        return
    rows = [
        [m.name, ",".join(m.tools), m.pypi or m.hf or m.conda or "", m.conda or "-", m.title, m.source]
        for m in catalog.mirrors.values()
    ]
    render_table(["NAME", "TOOLS", "URL", "CONDA", "TITLE", "SOURCE"], rows, title="Package mirrors")
    if catalog.datasets:
        click.echo("")
        render_table(
            ["NAME", "URL", "TITLE", "SOURCE"],
            [[d.name, d.url, d.title, d.source] for d in catalog.datasets.values()],
            title="Dataset mirrors (prefetch get --mirror NAME)",
        )
    click.echo(f"\nAdd or override mirrors in {catalog.user_file}")


@mirror.command("show")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--python", "python", default=None, help="Interpreter whose pip to ask [default: this one].")
def show(as_json: bool, python: str | None) -> None:
    """What pip, uv, conda and Hugging Face will really use, and why."""
    from prefetch.mirrors.configs.show import read_effective_mirrors
    from prefetch.errors import MirrorCatalogError
    from prefetch.mirrors.catalog import load_catalog

    config, _ = _dirs()
    try:
        catalog = load_catalog(config_dir=config)
    except MirrorCatalogError as exc:
        warn(f"{exc} (mirror names not shown)")
        catalog = None
    result = read_effective_mirrors(catalog=catalog, python=python)
    if as_json:
        echo_json(result)
        return
    rows = [[t.tool, t.url or "-", t.mirror or "-", t.source] for t in result.tools]
    render_table(["TOOL", "INDEX / ENDPOINT", "MIRROR", "SET BY"], rows)
    from prefetch.commands.error_line import hide_passwords

    for state in result.tools:
        if state.detail:
            click.echo(hide_passwords(f"{state.tool}: {state.detail}"))
    if result.env_overrides:
        click.echo("environment:")
        for name, value in result.env_overrides.items():
            click.echo(hide_passwords(f"  {name}={value}"))


@mirror.command("bench")
@click.argument("names", nargs=-1)
@click.option("--deadline", type=DEADLINE, default=8.0, show_default=True,
              help="Seconds allowed per mirror (all run in parallel).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def bench(names: tuple[str, ...], deadline: float, as_json: bool) -> None:
    """Measure throughput and latency of every mirror (or NAMES) in parallel."""
    from prefetch.mirrors.bench import bench_mirrors
    from prefetch.mirrors.catalog import load_catalog

    config, _ = _dirs()
    catalog = load_catalog(config_dir=config)
    mirrors = [catalog.get(n) for n in names] if names else list(catalog.mirrors.values())
    report = bench_mirrors(mirrors, deadline=deadline, project=catalog.bench_project, probe_file=catalog.bench_file,
                           probe_sha256=catalog.bench_sha256)
    if as_json:
        echo_json({"deadline_s": report.deadline_s, "fastest": report.fastest.name if report.fastest else None,
                   "results": list(report.results)})
        return
    rows = [
        [
            r.name,
            r.status.value,
            _rate(r.throughput_bps),
            f"{r.latency_s * 1000:.0f} ms" if r.latency_s is not None else "-",
            f"{r.bytes}",
            r.error or r.index_url,
        ]
        for r in report.results
    ]
    render_table(["MIRROR", "STATUS", "THROUGHPUT", "LATENCY", "BYTES", "NOTE"], rows,
                 title=f"Mirror speed (deadline {deadline:g}s each, in parallel)")
    if report.fastest:
        from prefetch.commands.invoked import typed

        click.echo(typed(f"fastest: {report.fastest.name}  (`prefetch mirror use {report.fastest.name}`)"))
    else:
        warn("no mirror delivered any bytes in time; check the network or raise --deadline")


@mirror.command("use")
@click.argument("name")
@click.option("--tool", "tools", default="pip", show_default=True,
              help="Comma-separated: pip, uv, conda, hf; or all.")
@click.option("--scope", type=click.Choice(["user", "site", "global"]), default="user", show_default=True,
              help="pip file: user (~/.config/pip/pip.conf), site (this venv), global (/etc/pip.conf).")
@click.option("--dry-run", is_flag=True, help="Print the diff; write nothing.")
@click.option("--deadline", type=DEADLINE, default=8.0, show_default=True,
              help="Seconds per mirror for `use fastest`.")
@click.option("--among", default=None, metavar="NAMES",
              help="For `use fastest`: only these mirrors (comma-separated).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def use(name: str, tools: str, scope: str, dry_run: bool, deadline: float, among: str | None,
        as_json: bool) -> None:
    """Point pip (and uv/conda/hf with --tool) at mirror NAME, or at the fastest one."""
    from prefetch.mirrors.configs.switch import use_mirror

    config, state = _dirs()
    names = [n.strip() for n in among.split(",") if n.strip()] if among is not None else None
    if names == []:  # `--among "$LIST"` with an empty LIST: not "every mirror"
        raise click.BadParameter("is empty; give mirror names, comma-separated", param_hint="'--among'")
    result = use_mirror(name, tools=tools, scope=scope, dry_run=dry_run, config_dir=config, state_dir=state,
                        deadline=deadline, among=names)
    for message in result.warnings:
        warn(message)
    if as_json:
        echo_json(result)
        return
    if result.bench is not None and result.bench.fastest is not None:
        fastest = result.bench.fastest
        click.echo(f"fastest: {fastest.name} ({_rate(fastest.throughput_bps)}, "
                   f"{(fastest.latency_s or 0) * 1000:.0f} ms)")
    for outcome in result.outcomes:
        plan = outcome.plan
        if plan is None:
            click.echo(f"{outcome.tool}: skipped ({outcome.skipped})")
            continue
        paths = ", ".join(str(w.path) for w in plan.writes)
        if dry_run:
            diff = plan.diff()
            click.echo(diff.rstrip("\n") if diff else f"{plan.tool}: {paths} already uses {plan.value}")
            continue
        if outcome.backup is None:
            click.echo(f"{plan.tool}: {paths} already uses {plan.value}; nothing written")
        else:
            click.echo(f"{plan.tool}: {plan.value} -> {paths} (backup {outcome.backup.id})")
        for note in plan.notes:
            click.echo(f"  note: {note}")
    effective = result.pip_effective
    if effective is not None and not getattr(effective, "error", None):
        click.echo(f"pip resolves from: {effective.index_url}  (asked pip; set by {effective.source})")
    if not dry_run and any(o.backup for o in result.outcomes):
        click.echo("undo: prefetch mirror restore")
    if dry_run:
        click.echo("(dry run: nothing written)")


@mirror.command("restore")
@click.argument("backup", required=False)
@click.option("--tool", "tools", default=None, help="Restore the newest backup of these tools (pip,uv,conda,hf|all).")
@click.option("--list", "list_only", is_flag=True, help="List backups instead of restoring.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def restore(backup: str | None, tools: str | None, list_only: bool, as_json: bool) -> None:
    """Put back the config files as they were before the last `mirror use` (or BACKUP)."""
    from prefetch.mirrors.configs.switch import list_restorable, restore_mirror

    _, state = _dirs()
    if list_only:
        found = list_restorable(state_dir=state, tools=tools)
        if as_json:
            echo_json(found)
            return
        rows = [
            [b.id, b.tool, b.mirror, b.kind, "yes" if b.restored else "no", ", ".join(str(f.path) for f in b.files)]
            for b in found
        ]
        render_table(["BACKUP", "TOOL", "MIRROR", "KIND", "RESTORED", "FILES"], rows)
        return
    from prefetch.mirrors.configs.backup import NoBackupError

    try:
        results = restore_mirror(state_dir=state, backup_id=backup, tools=tools)
    except NoBackupError as exc:
        if backup:
            raise  # a backup asked for by name that does not exist: a usage error
        # Everything is already restored: nothing wrong, nothing to do.
        if as_json:
            echo_json([])
        else:
            click.echo(f"nothing to restore: {exc}")
        return
    if as_json:
        echo_json(results)
        return
    for result in results:
        for item in result.files:
            if item.action == "left":  # (a link the user re-pointed or made since `use`: theirs)
                click.echo(f"{result.backup.tool}: {item.note}")
                continue
            verb = {"restored": "restored", "removed": "removed (did not exist before)",
                    "absent": "already absent", "merged": "restored"}[item.action]
            kept = ""
            if item.action == "merged":
                kept = f", keeping your later edit: {_shown_lines(item.kept)}" if item.kept else ", keeping your later edit"
            moved = f"; {item.note}" if item.changed else ""  # (a link re-pointed since: its old target)
            click.echo(f"{result.backup.tool}: {item.changed or item.path} {verb} from backup {result.backup.id}"
                       f"{kept}{moved}")
            if item.dropped:
                warn(f"{item.path} was edited after `mirror use` wrote it ({_shown_lines(item.dropped)}) in a way that"
                     f" cannot be kept apart from prefetch's change, so it is back as it was before `use` and that"
                     f" edit is gone from it; the edited file is saved as"
                     f" {item.edited_copy or result.safety_backup.directory}")
        click.echo(f"  (what it replaced is saved as backup {result.safety_backup.id})")


def _shown_lines(lines: tuple[str, ...]) -> str:
    shown = "; ".join(lines[:3])
    return shown + (f" and {len(lines) - 3} more line(s)" if len(lines) > 3 else "")
