"""``prefetch doctor``: what is configured and why downloads may fail."""

from __future__ import annotations

import click

from prefetch.commands.mirror import DEADLINE


@click.command()
@click.argument("datasets", nargs=-1, metavar="[NAME...]")
@click.option("--sources/--no-sources", default=True, show_default=True,
              help="Try every dataset source get would use (DNS, TCP, TLS, first byte, ~2 s of throughput).")
@click.option("--registry", "registries", multiple=True, type=click.Path(dir_okay=False), help="Extra registry TOML.")
@click.option("--deadline", type=DEADLINE, default=3.0, show_default=True,
              help="Seconds allowed for each reachability check (all run in parallel).")
@click.option("--python", "python", default=None, help="Interpreter whose pip to ask [default: this one].")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def doctor(datasets, sources: bool, registries, deadline: float, python: str | None, as_json: bool) -> int:
    """Check mirrors, environment overrides, the Keras cache, the network and dataset sources.

    Every dataset source get would use (origins, documented copies, PREFETCH_DATASET_MIRROR,
    mirrors.toml [datasets.*] entries, s3:// team stores) gets one verdict: ok, missing,
    throttled, captive portal, or blocked at dns/tcp/tls/http. NAMEs limit it to those
    datasets. Exit 0 when nothing is wrong, 1 when a check failed (or no source works).

    \b
    Examples (in a notebook cell):
      !prefetch doctor
      !prefetch doctor cifar10 --json
    """
    from prefetch.commands.mirror import echo_json
    from prefetch.doctor.checks import Level, run_doctor
    from prefetch.fs.paths import config_dir

    from pathlib import Path

    report = run_doctor(config_dir=config_dir(), python=python, deadline=deadline, sources=sources,
                        datasets=list(datasets) or None, registries=tuple(Path(r) for r in registries))
    if as_json:
        echo_json({"ok": not report.failed, "checks": list(report.checks), "sources": list(report.sources)})
    else:
        from prefetch.commands.error_line import hide_passwords
        from prefetch.commands.invoked import typed
        from prefetch.commands.output import STATE_COLOURS, stdout_style

        style = stdout_style()
        for check in report.checks:
            tag = style.paint(f"[{check.level.value:4}]", *STATE_COLOURS.get(check.level.value, ()))
            line = f"{tag} {check.topic:8} {check.message}"
            if check.hint and check.level in (Level.WARN, Level.FAIL):
                line += f"\n{'':16}-> {check.hint}"
            click.echo(typed(hide_passwords(line)), color=style.colour)
        problems = sum(1 for c in report.checks if c.level is Level.FAIL)
        warnings = sum(1 for c in report.checks if c.level is Level.WARN)
        click.echo(f"{problems} problem(s), {warnings} warning(s)")
    return 1 if report.failed else 0
