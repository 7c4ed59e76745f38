"""One watchdog thread for every deadline of the process, instead of a timer thread per request.

A ``threading.Timer`` per request starts (and waits for) a new thread each time: with
hundreds of small files, and a busy 2-core notebook, that costs more than the request.
:func:`call_at` books ``callback`` to run on the shared watchdog thread after ``delay``
seconds unless the returned handle is cancelled first. Callbacks must be quick (they
shut a socket down).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time

_lock = threading.Condition()
_heap: list[tuple[float, int, "Deadline"]] = []
_counter = itertools.count()
_thread: threading.Thread | None = None


class Deadline:
    """A booked callback; :meth:`cancel` before it runs and it never will."""

    __slots__ = ("callback", "cancelled")

    def __init__(self, callback) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def call_at(delay: float, callback) -> Deadline:
    """Run ``callback()`` on the watchdog thread in ``delay`` seconds, unless cancelled."""
    global _thread
    handle = Deadline(callback)
    with _lock:
        heapq.heappush(_heap, (time.monotonic() + delay, next(_counter), handle))
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_watch, name="prefetch-deadlines", daemon=True)
            _thread.start()
        elif _heap[0][2] is handle:
            _lock.notify()  # the new deadline is the earliest: the watchdog sleeps less
    return handle


def _watch() -> None:
    while True:
        with _lock:
            while _heap and _heap[0][2].cancelled:
                heapq.heappop(_heap)
            if not _heap:
                _lock.wait(5.0)
                continue
            when, _, handle = _heap[0]
            now = time.monotonic()
            if when > now:
                _lock.wait(when - now)
                continue
            heapq.heappop(_heap)
        try:
            handle.callback()
        except Exception:  # noqa: BLE001 - a deadline's callback must not end the watchdog
            pass
