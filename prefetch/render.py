"""Output for people: a tqdm bar on a terminal, plain rate-limited lines elsewhere.

Off a terminal (a notebook ``!`` cell, a log file) every line is plain text:
no ``\\r``, no ANSI colour, one event per line, at most one progress line per
file every few seconds or few percent, so ``tail -f`` and ``grep`` both work.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import TextIO

from prefetch.events import Event, EventKind

# A progress line, for tests and tools:
#   2026-11-22T05:40:01Z mnist.npz progress 4718592/11490434 41.1% 2.3MiB/s eta 0:03
PROGRESS_LINE = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (?P<file>.+) progress "
    r"(?P<done>\d+)/(?P<total>\d+|\?) (?P<percent>\d+\.\d|\?)% (?P<rate>[\d.]+[KMG]?i?B)/s eta (?P<eta>[\d:]+|\?)$"
)
EVENT_LINE = re.compile(r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (?P<file>.+?) (?P<kind>[a-z]+)(?: (?P<rest>.*))?$")


def human_bytes(n: float) -> str:
    """1536 -> '1.5KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}GiB"


def human_seconds(s: float | None) -> str:
    """83 -> '1:23'; None -> '?'."""
    if s is None:
        return "?"
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def timestamp(now: float | None = None) -> str:
    """The UTC time that starts every log line: 2026-11-22T05:40:01Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def format_event(event: Event, *, now: float | None = None) -> str:
    """One plain log line for ``event``."""
    head = f"{timestamp(now)} {event.file} {event.kind.value}"
    if event.kind is EventKind.PROGRESS:
        total = str(event.total) if event.total is not None else "?"
        pct = f"{event.percent:.1f}" if event.percent is not None else "?"
        return f"{head} {event.done}/{total} {pct}% {human_bytes(event.rate)}/s eta {human_seconds(event.eta)}"
    if event.kind is EventKind.START:
        total = human_bytes(event.total) if event.total is not None else "size unknown"
        resumed = f", {human_bytes(event.done)} already on disk" if event.done else ""
        return f"{head} {total}{resumed}"
    if event.kind is EventKind.DONE:
        return (
            f"{head} {human_bytes(event.done)} in {event.elapsed:.1f}s, "
            f"avg {human_bytes(event.rate)}/s, {event.message}"
        )
    if event.kind is EventKind.FAILED:
        return f"{head} exit={event.exit_code} {event.message}"
    if event.kind is EventKind.CACHED:
        return f"{head} already complete: {event.message}"
    return f"{head} {event.message}".rstrip()


class LineRenderer:
    """Plain lines for non-terminals, rate limited per file."""

    def __init__(self, stream: TextIO, *, min_interval: float = 5.0, min_percent: float = 10.0) -> None:
        self.stream = stream
        self.min_interval = min_interval
        self.min_percent = min_percent
        self.last: dict[str, tuple[float, float, int]] = {}
        self.lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        now = time.time()
        with self.lock:
            if event.kind is EventKind.PROGRESS:
                last_time, last_pct, last_done = self.last.get(event.file, (0.0, -100.0, -1))
                pct = event.percent if event.percent is not None else 0.0
                if event.done == last_done:
                    return  # nothing moved: the retry notes say why
                if now - last_time < self.min_interval and pct - last_pct < self.min_percent:
                    return
                self.last[event.file] = (now, pct, event.done)
            self.stream.write(format_event(event, now=now) + "\n")
            self.stream.flush()

    def close(self) -> None:
        """Nothing to tear down for plain lines."""


class BarRenderer:
    """tqdm bars, one per file, on a terminal; notes printed above the bars."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.bars: dict[str, object] = {}
        self.lock = threading.Lock()

    def _bar(self, event: Event):
        from tqdm import tqdm

        bar = self.bars.get(event.file)
        if bar is None:
            bar = tqdm(
                total=event.total,
                desc=event.file,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                file=self.stream,
                position=len(self.bars),
                leave=True,
                dynamic_ncols=True,
            )
            self.bars[event.file] = bar
        return bar

    def __call__(self, event: Event) -> None:
        from tqdm import tqdm

        with self.lock:
            if event.kind in (EventKind.START, EventKind.PROGRESS):
                bar = self._bar(event)
                if event.total is not None and bar.total != event.total:
                    bar.total = event.total
                bar.n = event.done
                bar.refresh()
                return
            if event.kind in (EventKind.DONE, EventKind.FAILED) and event.file in self.bars:
                bar = self.bars.pop(event.file)
                if event.kind is EventKind.DONE:
                    bar.total = event.total if event.total is not None else bar.total
                    bar.n = event.done
                bar.close()  # leaves the final bar on screen, once
            tqdm.write(_plain_message(event), file=self.stream)

    def close(self) -> None:
        with self.lock:
            for bar in self.bars.values():
                bar.close()
            self.bars.clear()


def _plain_message(event: Event) -> str:
    line = format_event(event)
    return line.split(" ", 1)[1]  # drop the timestamp on a terminal


def make_renderer(stream: TextIO | None = None, *, quiet: bool = False, skip_failures: bool = False):
    """A bar renderer on a TTY, plain lines elsewhere, nothing when ``quiet``.

    Args:
        skip_failures: leave FAILED events out (the caller prints one error line).
    """
    stream = stream or sys.stderr
    if quiet:
        return _Quiet()
    renderer = BarRenderer(stream) if _is_sized_terminal(stream) else LineRenderer(stream)
    if skip_failures:
        return _SkipFailures(renderer)
    return renderer


def _is_sized_terminal(stream: TextIO) -> bool:
    """A terminal a bar can be drawn on (a pty with no size, as under `script`, is not)."""
    try:
        return stream.isatty() and os.get_terminal_size(stream.fileno()).columns > 0
    except (OSError, ValueError, AttributeError):
        return False


class _SkipFailures:
    def __init__(self, inner) -> None:
        self.inner = inner

    def __call__(self, event: Event) -> None:
        if event.kind is not EventKind.FAILED:
            self.inner(event)

    def close(self) -> None:
        self.inner.close()


class _Quiet:
    def __call__(self, event: Event) -> None:
        pass

    def close(self) -> None:
        pass
