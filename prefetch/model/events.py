"""Progress events: what the library reports instead of printing."""

from __future__ import annotations

import threading
from enum import Enum
from typing import Callable

from prefetch.model.lean import dataclass


class EventKind(str, Enum):
    """What happened to one file."""

    START = "start"  # transfer begins (or resumes)
    PROGRESS = "progress"  # bytes moved
    NOTE = "note"  # something worth a log line: restart, retry, source dropped
    VERIFY = "verify"  # hash checked
    EXTRACT = "extract"  # archive extracted
    DONE = "done"  # complete, verified and in place
    CACHED = "cached"  # already complete: nothing downloaded
    FAILED = "failed"  # gave up; resumable state kept where possible


@dataclass(frozen=True)
class Event:
    """One progress event for one file."""

    kind: EventKind
    file: str
    done: int = 0
    total: int | None = None
    rate: float = 0.0  # smoothed bytes/second
    message: str = ""
    connections: int = 0
    elapsed: float = 0.0
    exit_code: int = 0  # FAILED: the error's exit code (errors.ExitCode)
    files: int = 0  # a run-level NOTE: how many files the run has (renderers summarize many)

    @property
    def percent(self) -> float | None:
        """Percent complete, when the size is known."""
        if not self.total:
            return None
        return 100.0 * self.done / self.total

    @property
    def eta(self) -> float | None:
        """Seconds left at the smoothed rate, when known."""
        if not self.total or self.rate <= 0:
            return None
        return max(0.0, (self.total - self.done) / self.rate)


EventSink = Callable[[Event], None]


# The note of a file --content-disposition renamed (flow/served_names.py): a job's record takes
# the new path from it (jobs/job_progress.py); a run of many files does not show it (ui/many.py).
SAVED_AS = "--content-disposition: saved as "


def ignore_event(event: Event) -> None:
    """An event sink that drops everything."""


class GuardedSink:
    """A caller's event callback (``on_event=`` of the API), run so that its exception cannot
    break a download: the first one is kept (``error``, for the caller to raise as it was
    raised) and passed to ``on_error`` (which stops the downloads, resumable); after it,
    events go nowhere."""

    def __init__(self, callback: Callable[[Event], None], on_error: Callable[[Exception], None]) -> None:
        self.callback = callback
        self.on_error = on_error
        self.error: Exception | None = None
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if self.error is not None:
            return
        try:
            self.callback(event)
        except Exception as exc:  # noqa: BLE001 - the caller's own error, raised to the caller
            with self._lock:
                first = self.error is None
                if first:
                    self.error = exc
            if first:
                self.on_error(exc)
