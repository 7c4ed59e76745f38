"""Progress of many files at once, summarized: files done/total, bytes, rate, ETA, files in flight.

A run of hundreds of files cannot show a line (or a bar) per file and stay readable in a
notebook cell or a log. Once a run has more than :data:`MANY` files, the renderers
(``render.py``) show :meth:`ManyFiles.summary` instead of per-file progress, and one line
per finished file.
"""

from __future__ import annotations

import time

from prefetch.model.events import SAVED_AS, Event, EventKind
from prefetch.ui.units import human_bytes, human_seconds

MANY = 8  # more files than this in one run: summaries instead of per-file progress


class ManyFiles:
    """What a renderer knows of a run's files, from their events (callers serialize calls)."""

    def __init__(self) -> None:
        self.expected: int | None = None  # from a run-level event (Event.files), when one came
        self.active: dict[str, Event] = {}  # file -> its latest event, while in flight
        self.seen: set[str] = set()
        self.finished = 0
        self.failed = 0
        self.finished_bytes = 0
        self.finished_sizes: list[int] = []
        self.cached = 0  # of the finished: already here (nothing fetched)
        self.cached_bytes = 0
        self.began: float | None = None  # monotonic: the first file's first event
        self.last_end: float | None = None  # monotonic: the latest file's end

    @property
    def many(self) -> bool:
        return max(len(self.seen), self.expected or 0) > MANY

    def quiet(self, event: Event) -> bool:
        """A note not shown in a run of many files: each file's ``saved as`` (its line says where)."""
        return self.many and event.kind is EventKind.NOTE and event.message.startswith(SAVED_AS)

    def take(self, event: Event) -> None:
        """Count ``event`` in."""
        if event.files:
            self.expected = event.files
            return
        if (event.kind is EventKind.NOTE and event.file not in self.seen and event.file not in self.active
                and not event.message.startswith(SAVED_AS)):  # (a file's name, said before the run starts it)
            return  # a note about a host or the run, not a file
        self.seen.add(event.file)
        now = time.monotonic()
        if self.began is None:
            self.began = now
        if event.kind in (EventKind.DONE, EventKind.CACHED, EventKind.FAILED):
            self.last_end = now
            self.active.pop(event.file, None)
            if event.kind is EventKind.FAILED:
                self.failed += 1
            else:
                self.finished += 1
                self.finished_bytes += event.done
                self.finished_sizes.append(event.done)
                if event.kind is EventKind.CACHED:
                    self.cached += 1
                    self.cached_bytes += event.done
        elif event.kind in (EventKind.START, EventKind.PROGRESS):
            self.active[event.file] = event

    def summary(self, *, names: int = 2) -> str:
        """``120/300 files, 4.1MiB/~45.0MiB, 2.3MiB/s, eta 0:12; now a.bin 41%, b.bin +30``;
        once every file has ended: ``300/300 files, 9.4MiB in 3.2s (2.9MiB/s)``, or
        ``300/300 files (all already here)``."""
        count = self.expected or len(self.seen)
        if not self.active and count and self.finished + self.failed >= count:
            return self._ended(count)
        done = self.finished_bytes + sum(e.done for e in self.active.values())
        rate = sum(e.rate for e in self.active.values() if e.kind is EventKind.PROGRESS)
        total = self._total(count)
        parts = [f"{self.finished}/{count} files"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        parts.append(f"{human_bytes(done)}/{'~' if total and self._estimated(count) else ''}"
                     f"{human_bytes(total) if total else '?'}")
        parts.append(f"{human_bytes(rate)}/s")
        eta = (total - done) / rate if total and rate > 0 and total > done else None
        parts.append(f"eta {human_seconds(eta)}")
        line = ", ".join(parts)
        if self.active:
            shown = list(self.active.values())[:names]
            now = ", ".join(f"{e.file} {e.percent:.0f}%" if e.percent is not None else e.file for e in shown)
            more = len(self.active) - len(shown)
            line += f"; now {now}" + (f" +{more}" if more else "")
        return line

    def _ended(self, count: int) -> str:
        """The last summary: what came, in how long, at what average rate (files already here
        counted apart: they moved no bytes)."""
        took = (self.last_end or 0.0) - (self.began or 0.0)
        fetched = self.finished_bytes - self.cached_bytes
        line = f"{self.finished}/{count} files"
        if self.cached:
            line += " (all already here)" if self.cached == self.finished else f" ({self.cached} already here)"
        if self.failed:
            line += f", {self.failed} failed"
        if self.cached < self.finished:
            line += f", {human_bytes(fetched)} in {took:.1f}s"
            if took > 0 and fetched:
                line += f" ({human_bytes(fetched / took)}/s)"
        return line

    def _estimated(self, count: int) -> bool:
        return self.finished + self.failed + len(self.active) < count or any(
            e.total is None for e in self.active.values())

    def _total(self, count: int) -> int | None:
        """Bytes of the whole run: known sizes, and the average size for files not started yet."""
        sizes = self.finished_sizes + [e.total for e in self.active.values() if e.total is not None]
        if not sizes:
            return None
        unknown = max(0, count - self.finished - self.failed - len(self.active)) + sum(
            e.total is None for e in self.active.values())
        return sum(sizes) + unknown * (sum(sizes) // len(sizes))
