"""A repo's progress: each file's events passed on, and the repo's summed bytes and rate."""

from __future__ import annotations

import threading
import time

from prefetch.model.events import Event, EventKind, EventSink


class RepoProgress:
    """Forwards each file's events and adds the repo's own (summed bytes, at most every half second)."""

    def __init__(self, label: str, total: int, sink: EventSink, interval: float = 0.5) -> None:
        self.label = label
        self.total = total
        self.sink = sink
        self.interval = interval
        self.lock = threading.Lock()
        self.done: dict[str, int] = {}
        self.rates: dict[str, float] = {}
        self.last = 0.0
        self.started = time.monotonic()

    def emit(self, event: Event) -> None:
        self.sink(event)

    def start(self) -> None:
        self.sink(Event(EventKind.START, self.label, done=0, total=self.total))

    def file_sink(self, name: str) -> EventSink:
        def sink(event: Event) -> None:
            self.sink(event)
            if event.kind in (EventKind.START, EventKind.PROGRESS):
                with self.lock:
                    self.done[name] = event.done
                    self.rates[name] = event.rate
                self._maybe_emit()
        return sink

    def files_sink(self, event: Event) -> None:
        """One sink for all the repo's files, each known by its event's ``file``."""
        self.file_sink(event.file)(event)

    def finish_file(self, name: str, size: int) -> None:
        with self.lock:
            self.done[name] = size
            self.rates[name] = 0.0
        self._maybe_emit(force=True)

    def _maybe_emit(self, *, force: bool = False) -> None:
        now = time.monotonic()
        with self.lock:
            if not force and now - self.last < self.interval:
                return
            self.last = now
            done, rate = sum(self.done.values()), sum(self.rates.values())
        self.sink(Event(EventKind.PROGRESS, self.label, done=min(done, self.total), total=self.total, rate=rate,
                        elapsed=now - self.started))
