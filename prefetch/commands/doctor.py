"""``prefetch doctor``: what is configured and why downloads may fail."""

from __future__ import annotations

import click


@click.command()
@click.option("--deadline", type=click.FloatRange(min=0.1), default=3.0, show_default=True,
              help="Seconds allowed for each reachability check (all run in parallel).")
@click.option("--python", "python", default=None, help="Interpreter whose pip to ask [default: this one].")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def doctor(deadline: float, python: str | None, as_json: bool) -> int:
    """Check mirrors, environment overrides, the Keras cache and the network.

    Exit 0 when nothing is wrong, 1 when a check failed.

    \b
    Example (in a notebook cell):
      !prefetch doctor
    """
    from prefetch.commands.mirror import echo_json
    from prefetch.doctor import Level, run_doctor
    from prefetch.paths import config_dir

    report = run_doctor(config_dir=config_dir(), python=python, deadline=deadline)
    if as_json:
        echo_json({"ok": not report.failed, "checks": list(report.checks)})
    else:
        from prefetch.commands.output import STATE_COLOURS, stdout_style

        style = stdout_style()
        for check in report.checks:
            tag = style.paint(f"[{check.level.value:4}]", *STATE_COLOURS.get(check.level.value, ()))
            line = f"{tag} {check.topic:8} {check.message}"
            if check.hint and check.level in (Level.WARN, Level.FAIL):
                line += f"\n{'':16}-> {check.hint}"
            click.echo(line, color=style.colour)
        problems = sum(1 for c in report.checks if c.level is Level.FAIL)
        warnings = sum(1 for c in report.checks if c.level is Level.WARN)
        click.echo(f"{problems} problem(s), {warnings} warning(s)")
    return 1 if report.failed else 0
