"""Shared output for the commands: tables that are never cut, colour by the NO_COLOR rules."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click

# State words and their colour, wherever a state is shown.
STATE_COLOURS = {
    "done": ("green",), "cached": ("green",), "ok": ("green",), "in place": ("green",),
    "failed": ("red",), "corrupt": ("red",), "fail": ("red",), "error": ("red",),
    "interrupted": ("yellow",), "cancelled": ("yellow",), "warn": ("yellow",), "timeout": ("yellow",),
    "downloading": ("cyan",), "running": ("cyan",), "queued": ("cyan",), "waiting": ("cyan",),
}


def stdout_style():
    """The style of this process's stdout (colour, notebook, plain)."""
    import sys

    from prefetch.ui.style import detect_style

    return detect_style(sys.stdout)


def echo_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, title: str | None = None,
               right: Sequence[int] = (), state_columns: Sequence[int] = (),
               colour_of: Callable[[int, str], tuple[str, ...]] | None = None) -> None:
    """Print a table on stdout: every column as wide as its widest cell, values never cut."""
    from prefetch.ui.style import format_table

    style = stdout_style()

    def paint(column: int, cell: str) -> tuple[str, ...]:
        if column in state_columns:
            return STATE_COLOURS.get(cell, ())
        return colour_of(column, cell) if colour_of else ()

    # color=: click would strip the escapes off a terminal, but FORCE_COLOR asked for them.
    if title:
        click.echo(style.paint(title, "bold"), color=style.colour)
    for line in format_table(headers, [[str(c) for c in r] for r in rows], right=right, style=style, colour_of=paint):
        click.echo(line, color=style.colour)
