"""Progress for people: where it lands decides how it looks.

- A terminal: a tqdm bar per file (tqdm imported only then).
- A notebook ``!`` cell (a pty, but an output area that knows no cursor
  movement): event lines, and ONE status line for every file rewritten in place
  with ``\\r`` at most twice a second (``LiveLineRenderer``).
- Anything else (a pipe, a log file, ``--plain``/``PREFETCH_PLAIN=1``): plain
  lines, no ``\\r``, no ANSI colour, one event per line, at most one progress
  line per file every few seconds or few percent, so ``tail -f`` and ``grep``
  both work (``LineRenderer``).

Sizes are in human units (``1.5MiB``); exact byte counts are in ``--json``.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from typing import TextIO

from prefetch.ui.many import ManyFiles
from prefetch.ui.units import human_bytes, human_seconds  # noqa: F401 - importable from here
from prefetch.model.events import Event, EventKind

# A progress line, for tests and tools:
#   2026-11-22T05:40:01Z mnist.npz progress 4.5MiB/11.0MiB 41.1% 2.3MiB/s eta 0:03
_SIZE = r"[\d.]+(?:B|KiB|MiB|GiB)"
_LINES = {  # PROGRESS_LINE and EVENT_LINE, compiled when first imported (no command of prefetch reads them)
    "PROGRESS_LINE": (
        r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (?P<file>.+) progress "
        rf"(?P<done>{_SIZE})/(?P<total>{_SIZE}|\?) (?P<percent>\d+\.\d|\?)% (?P<rate>{_SIZE})/s eta (?P<eta>[\d:]+|\?)$"
    ),
    "EVENT_LINE": r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (?P<file>.+?) (?P<kind>[a-z]+)(?: (?P<rest>.*))?$",
}


def __getattr__(name: str) -> re.Pattern:
    if name not in _LINES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    pattern = globals()[name] = re.compile(_LINES[name])
    return pattern


def timestamp(now: float | None = None) -> str:
    """The UTC time that starts every log line: 2026-11-22T05:40:01Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))


def format_event(event: Event, *, now: float | None = None, stopped: str = "interrupted") -> str:
    """One plain log line for ``event``.

    Args:
        stopped: the word for a file stopped by an interrupt (exit 7): ``interrupted``,
            or ``cancelled`` when ``prefetch cancel`` asked for it.
    """
    head = f"{timestamp(now)} {event.file} {event.kind.value}"
    if event.kind is EventKind.PROGRESS:
        total = human_bytes(event.total) if event.total is not None else "?"
        pct = f"{event.percent:.1f}" if event.percent is not None else "?"
        return (f"{head} {human_bytes(event.done)}/{total} {pct}% {human_bytes(event.rate)}/s "
                f"eta {human_seconds(event.eta)}")
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
        if event.exit_code == 7:
            return f"{timestamp(now)} {event.file} {stopped} {event.message}".rstrip()
        return f"{head} exit={event.exit_code} {event.message}"
    if event.kind is EventKind.CACHED:
        return f"{head} already complete: {event.message}"
    return f"{head} {event.message}".rstrip()


class _StartHold:
    """Holds a file's ``start`` event until its size is known (the probe answers after it).

    ``feed`` returns the events to show now: a held ``start`` comes out with the
    size filled in, just before the first progress that knows it (or the file's end).
    Progress before any byte has moved (``0/?``) is dropped.
    """

    def __init__(self) -> None:
        self.held: dict[str, Event] = {}

    def feed(self, event: Event) -> list[Event]:
        import dataclasses

        if event.kind is EventKind.START:
            if event.total is None:
                self.held[event.file] = event
                return []
            return [event]
        held = self.held.pop(event.file, None)
        out: list[Event] = []
        if event.kind is EventKind.PROGRESS and event.total is None and event.done <= (held.done if held else 0):
            if held is not None:
                self.held[event.file] = held
            return []  # nothing moved and no size yet: no "0/? ?%" line
        if held is not None:
            if event.kind is EventKind.NOTE:
                self.held[event.file] = held  # a retry note before the size is known: keep holding
            elif event.kind in (EventKind.PROGRESS, EventKind.VERIFY, EventKind.DONE):
                out.append(dataclasses.replace(held, total=event.total))
            # FAILED before any byte or size: no start line at all
        out.append(event)
        return out


class LineRenderer:
    """Plain lines for non-terminals, rate limited per file."""

    def __init__(self, stream: TextIO, *, min_interval: float = 5.0, min_percent: float = 10.0) -> None:
        self.stream = stream
        self.min_interval = min_interval
        self.min_percent = min_percent
        self.last: dict[str, tuple[float, float, int]] = {}
        self.lock = threading.Lock()
        self.hold = _StartHold()
        self.stopped_word = "interrupted"  # the worker says "cancelled" after `prefetch cancel`
        self.many = ManyFiles()  # more than MANY files: one summary line per interval, one line per finished file
        self.summary_at = 0.0

    def __call__(self, event: Event) -> None:
        now = time.time()
        with self.lock:
            self.many.take(event)
            if self.many.quiet(event):
                return
            for e in self.hold.feed(event):
                self._write(e, now)

    def _write(self, event: Event, now: float) -> None:
        if self.many.many and event.kind in (EventKind.START, EventKind.VERIFY, EventKind.PROGRESS):
            self.summary_at = self.summary_at or now  # the first summary after an interval, when bytes moved
            if now - self.summary_at >= self.min_interval and self.many.active:
                self.summary_at = now
                self.stream.write(f"{timestamp(now)} files summary {self.many.summary()}\n")
                self.stream.flush()
            return  # per file: the line when it is finished
        if event.kind is EventKind.PROGRESS:
            last_time, last_pct, last_done = self.last.get(event.file, (0.0, -100.0, -1))
            pct = event.percent if event.percent is not None else 0.0
            if event.done == last_done or event.done == 0:
                return  # nothing moved: the retry notes say why
            if now - last_time < self.min_interval and pct - last_pct < self.min_percent:
                return
            self.last[event.file] = (now, pct, event.done)
        self.stream.write(format_event(event, now=now, stopped=self.stopped_word) + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Nothing to tear down for plain lines."""


class LiveLineRenderer:
    """For a notebook ``!`` cell: event lines, plus one status line rewritten with ``\\r``.

    The status line covers every file in flight (``a.npz 41% 2.3MiB/s eta 0:03 | b.tgz 7% ...``)
    and is redrawn at most every ``interval`` seconds, so the cell's stream stays
    at about two messages a second and the rendered cell at a few lines per file.
    No cursor movement and no clear-line escapes: only ``\\r`` and spaces.
    """

    def __init__(self, stream: TextIO, *, interval: float = 0.5, colour: bool = False) -> None:
        from prefetch.ui.style import Style

        self.stream = stream
        self.interval = interval
        self.style = Style(colour=colour)
        self.lock = threading.Lock()
        self.hold = _StartHold()
        self.active: dict[str, Event] = {}
        self.shown = ""  # the status line now on screen
        self.drawn_at = 0.0
        self.many = ManyFiles()  # more than MANY files: the status line summarizes them

    def __call__(self, event: Event) -> None:
        with self.lock:
            self.many.take(event)
            if self.many.quiet(event):
                return
            for e in self.hold.feed(event):
                self._take(e)

    def _take(self, event: Event) -> None:
        now = time.monotonic()
        if self.many.many and event.kind not in (EventKind.FAILED, EventKind.NOTE, EventKind.EXTRACT):
            # Hundreds of files: the status line counts them; failures and notes stay on screen.
            self.active.pop(event.file, None)
            if now - self.drawn_at >= self.interval:  # at most twice a second, whatever the file count
                self._draw(self.many.summary())
                self.drawn_at = now
            return
        if event.kind is EventKind.PROGRESS:
            self.active[event.file] = event
            if now - self.drawn_at >= self.interval:
                self._draw(self._status())
                self.drawn_at = now
            return
        if event.kind is EventKind.START:
            self.active[event.file] = event
        elif event.kind in (EventKind.DONE, EventKind.FAILED, EventKind.CACHED, EventKind.VERIFY):
            self.active.pop(event.file, None)
        line = _plain_message(event)
        if event.kind is EventKind.DONE:
            line = self.style.paint(line, "green")
        elif event.kind is EventKind.FAILED:
            line = self.style.paint(line, "red" if event.exit_code != 7 else "yellow")
        self._draw(line, permanent=True)
        if self.active:
            self._draw(self._status())
            self.drawn_at = now

    def _status(self) -> str:
        if self.many.many:
            return self.many.summary()
        parts = []
        for e in self.active.values():
            pct = f"{e.percent:.0f}%" if e.percent is not None else human_bytes(e.done)
            part = f"{e.file} {pct}"
            if e.kind is EventKind.PROGRESS:
                part += f" {human_bytes(e.rate)}/s eta {human_seconds(e.eta)}"
            parts.append(part)
        return " | ".join(parts)

    def _draw(self, text: str, *, permanent: bool = False) -> None:
        pad = " " * max(0, len(self.shown) - len(text))
        self.stream.write("\r" + text + pad + ("\n" if permanent else ""))
        self.shown = "" if permanent else text
        self.stream.flush()

    def close(self) -> None:
        with self.lock:
            if self.many.many:
                self._draw(self.many.summary(), permanent=True)  # the last count stays
            elif self.shown:
                self.stream.write("\r" + " " * len(self.shown) + "\r")
                self.shown = ""
                self.stream.flush()


class BarRenderer:
    """tqdm bars, one per file, on a terminal; notes printed above the bars."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.bars: dict[str, object] = {}
        self.lock = threading.Lock()
        self.many = ManyFiles()  # more than MANY files: one bar for them all

    def _summary_bar(self, event: Event) -> None:
        from tqdm import tqdm

        for bar in self.bars.values():  # the per-file bars of the first files give way to one
            bar.close()
        self.bars.clear()
        if event.kind is EventKind.FAILED or (event.kind is EventKind.NOTE and not event.files):
            tqdm.write(_plain_message(event), file=self.stream)
        if getattr(self, "_bar_all", None) is None:
            self._bar_all = tqdm(desc="files", bar_format="{desc}", file=self.stream, leave=True)
            self._bar_at = 0.0
        now = time.monotonic()
        if now - self._bar_at >= 0.5 or event.kind is EventKind.FAILED:  # a few redraws a second at most
            self._bar_at = now
            self._bar_all.set_description_str(self.many.summary(), refresh=True)

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
            self.many.take(event)
            if self.many.quiet(event):
                return
            if self.many.many:
                self._summary_bar(event)
                return
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
            if getattr(self, "_bar_all", None) is not None:
                self._bar_all.set_description_str(self.many.summary(), refresh=True)  # the final count
                self._bar_all.close()


def _plain_message(event: Event) -> str:
    line = format_event(event)
    return line.split(" ", 1)[1]  # drop the timestamp on a terminal


def make_renderer(stream: TextIO | None = None, *, quiet: bool = False, skip_failures: bool = False):
    """The renderer for ``stream`` (see the module docstring); nothing when ``quiet``.

    Args:
        skip_failures: leave FAILED events out (the caller prints one error line).
    """
    stream = stream or sys.stderr
    if quiet or stream is None:  # (stderr closed, `2>&-`: nowhere to write, and the download goes on)
        return _Quiet()
    from prefetch.ui.style import detect_style

    style = detect_style(stream)
    if style.plain or not style.live:
        renderer = LineRenderer(stream)
    elif style.notebook:
        renderer = LiveLineRenderer(stream, colour=style.colour)
    elif _is_sized_terminal(stream):
        renderer = BarRenderer(stream)
    else:
        renderer = LineRenderer(stream)
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
