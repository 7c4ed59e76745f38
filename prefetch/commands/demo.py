"""``prefetch demo``: the whole flow offline, against a built-in local origin."""

from __future__ import annotations

import sys

import click


@click.command()
@click.option("--keep", is_flag=True, help="Keep the temporary cache instead of deleting it.")
def demo(keep):
    """Download a synthetic dataset from a built-in local origin: interrupted, resumed,
    verified and extracted into a temporary Keras cache. Needs no network.

    \b
    Example (in a notebook cell):
      !prefetch demo
    """
    import shutil
    import tempfile
    from pathlib import Path

    from prefetch.demo.run import demo_exit_code, run_demo
    from prefetch.model.events import EventKind
    from prefetch.ui.render import LineRenderer, human_bytes

    import os

    out = sys.stdout if sys.stdout is not None else open(os.devnull, "w")  # (`prefetch demo >&-`)
    if "utf" not in (getattr(out, "encoding", None) or "utf-8").lower() and hasattr(out, "reconfigure"):
        # An ascii or latin-1 stdout (PYTHONIOENCODING, the locale): a path it cannot encode is
        # written escaped, as stderr does; a failed write in the event callback fails the file.
        out.reconfigure(errors="backslashreplace")
    lines = LineRenderer(out, min_interval=1.0, min_percent=20.0)

    def show(event):
        if event.file == "demo":
            out.write(f"\n== {event.message}\n")
            out.flush()
        elif event.kind is not EventKind.FAILED:
            lines(event)

    _check_room(tempfile.gettempdir())
    root = Path(tempfile.mkdtemp(prefix="prefetch-demo-"))
    try:
        report = run_demo(root, on_event=show)
        click.echo(f"\norigin: {report.origin} (local, throttled, dropped one connection)")
        for step in report.steps:
            states = ", ".join(f"{r.name}: {r.status}" + (f" ({r.error})" if r.error else "") for r in step.results)
            click.echo(f"{step.title.split(' ', 1)[0]} {states}")
        click.echo(
            f"dataset {human_bytes(report.size)}; origin sent {human_bytes(report.bytes_served)} "
            f"in all (resume re-sent {human_bytes(max(0, report.bytes_served - report.size))})"
        )
        click.echo(f"\nKeras cache at {root}:")
        for path, size in report.tree:
            click.echo(f"  {path}" + ("" if size < 0 else f"  ({human_bytes(size)})"))
        code = demo_exit_code(report)
        click.echo("\ndemo ok: every file verified and in place" if code == 0 else "\ndemo FAILED", err=code != 0)
        return code
    finally:
        if keep:
            click.echo(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


DEMO_ROOM = 24 << 20  # what the demo's cache takes (about 19 MiB: archive, copy, two extractions), with room to spare


def _check_room(tmp: str) -> None:
    """The temporary dir has room for the demo, or one line saying where to point TMPDIR (exit 5)."""
    import os

    from prefetch.errors import DiskFullError
    from prefetch.ui.render import human_bytes

    try:
        st = os.statvfs(tmp)
    except OSError:
        return  # (mkdtemp's own error, if any, says more)
    free = st.f_bavail * st.f_frsize
    if st.f_blocks and free < DEMO_ROOM:  # (a filesystem that reports no size at all, as some FUSE ones do: tried)
        raise DiskFullError(f"prefetch demo needs about {human_bytes(DEMO_ROOM)} free in the temporary dir {tmp}; "
                            f"it has {human_bytes(free)}: point TMPDIR at a dir with room (TMPDIR=/some/dir "
                            f"prefetch demo)")
