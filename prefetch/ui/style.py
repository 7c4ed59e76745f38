"""How output should look where it lands: a terminal, a notebook ``!`` cell, a pipe or a log.

A notebook ``!`` cell runs its command under an 80x24 pseudo-terminal, but the
browser shows the text in an output area of its own width: a table fitted to 80
columns would be cut or wrapped for nothing, and cursor movements (tqdm's
stacked bars) are not understood. So tables here are never fitted to the
terminal: each column is as wide as its widest cell, and values are never cut.

Colour: ``NO_COLOR`` (any non-empty value) means no escape byte at all;
otherwise ``FORCE_COLOR`` (non-empty, not ``0``) turns colour on even off a
terminal; otherwise colour only on a terminal. ``PREFETCH_PLAIN=1`` (or the
``--plain`` flag, which sets it) means plain log lines: no colour, no ``\\r``,
no bars, as in a log file.

Nothing here imports tqdm; tables are drawn here (never cut or wrapped to a terminal width).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TextIO

PLAIN_ENV = "PREFETCH_PLAIN"
_ANSI = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}
# Kernels whose `!` cells run commands: ipykernel (Jupyter, Kaggle, ...) and Colab's launcher.
_KERNEL_MARKERS = ("ipykernel", "colab_kernel_launcher")


@dataclass(frozen=True)
class Style:
    """What a stream can show."""

    colour: bool = False  # ANSI colours and bold
    live: bool = False  # a line may be rewritten in place with "\r"
    notebook: bool = False  # a notebook `!` cell (no cursor movement; wide output area)
    plain: bool = False  # log lines only (--plain / PREFETCH_PLAIN)

    def paint(self, text: str, *styles: str) -> str:
        """``text`` in the given styles (``bold``, ``green``, ...) when colour is on."""
        codes = [_ANSI[s] for s in styles if s in _ANSI]
        if not self.colour or not codes or not text:
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m"


def _truthy(value: str | None) -> bool:
    return bool(value) and value.strip().lower() not in ("0", "false", "no", "off")


def is_plain(env: Mapping[str, str] | None = None) -> bool:
    """``PREFETCH_PLAIN`` asks for log lines only."""
    env = os.environ if env is None else env
    return _truthy(env.get(PLAIN_ENV))


def wants_colour(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """The NO_COLOR / FORCE_COLOR / terminal rule (see the module docstring)."""
    env = os.environ if env is None else env
    if env.get("NO_COLOR") or is_plain(env):
        return False
    if _truthy(env.get("FORCE_COLOR")):
        return True
    return _isatty(stream) and env.get("TERM") != "dumb"


def detect_style(stream: TextIO, env: Mapping[str, str] | None = None) -> Style:
    """The style for ``stream`` in this process's situation."""
    env = os.environ if env is None else env
    plain = is_plain(env)
    return Style(
        colour=wants_colour(stream, env),
        live=not plain and _isatty(stream),
        notebook=in_notebook_cell(env),
        plain=plain,
    )


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def in_notebook_cell(env: Mapping[str, str] | None = None, *, pid: int | None = None) -> bool:
    """True when this process descends from a notebook kernel (a ``!`` cell or ``%%bash``).

    Jupyter's kernel launcher sets ``JPY_PARENT_PID`` in the kernel's environment,
    which its children inherit; other launchers (Colab) are found by walking up
    the parent processes' command lines.
    """
    env = os.environ if env is None else env
    if "PREFETCH_NOTEBOOK" in env:  # an explicit answer wins (1/0)
        return _truthy(env["PREFETCH_NOTEBOOK"])
    if env.get("JPY_PARENT_PID"):
        return True
    current = os.getppid() if pid is None else pid
    for _ in range(8):
        if current <= 1:
            return False
        try:
            with open(f"/proc/{current}/cmdline", "rb") as fh:
                cmdline = fh.read().decode("utf-8", "replace")
            with open(f"/proc/{current}/stat", "rb") as fh:
                stat = fh.read().decode("utf-8", "replace")
        except OSError:
            return False
        if any(marker in cmdline for marker in _KERNEL_MARKERS):
            return True
        try:
            current = int(stat[stat.rfind(")") + 2 :].split()[1])
        except (IndexError, ValueError):
            return False
    return False


def format_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Sequence[int] = (),
    style: Style = Style(),
    colour_of: Callable[[int, str], tuple[str, ...]] | None = None,
) -> list[str]:
    """Aligned columns, each as wide as its widest cell: nothing is ever cut or wrapped.

    Args:
        right: indexes of right-aligned columns (numbers).
        colour_of: ``(column, cell) -> styles`` for a cell's colour (with ``style.colour``).
    """
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for n, row in enumerate([list(headers), *rows]):
        cells = []
        last = len(widths) - 1
        for i, (cell, width) in enumerate(zip(row, widths)):
            padded = cell.rjust(width) if i in right else cell.ljust(width) if i < last else cell
            if n == 0:
                padded = style.paint(padded, "bold")
            elif colour_of is not None:
                painted = style.paint(cell, *colour_of(i, cell))
                padded = padded.replace(cell, painted, 1) if cell else padded
            cells.append(padded)
        lines.append("  ".join(cells).rstrip())
    return lines
