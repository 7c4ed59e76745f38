"""A bandwidth limit shared by every connection of one command (``--limit-rate``).

One ``RateLimiter`` is made per ``get`` (foreground or background job) and handed
to every transfer through ``TransferOptions.limiter``; each connection books
``wait(n)`` before it reads at most ``n`` (at most ``chunk``) bytes, and gives back
what the read did not use with ``refund``. Reading slower makes TCP slow the
sender down, so the *total* of all connections stays at the limit and other
programs on the same link (pip, the notebook itself) keep their share.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable

_RATE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmg]?)(i?b?)?(?:/s)?\s*$", re.I)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


class RateLimiter:
    """A thread-safe token bucket: at most ``rate`` bytes/s in total, after a small burst.

    ``wait(n)`` books ``n`` bytes on a shared schedule (GCRA: the "theoretical
    arrival time" of the next byte) and sleeps until the schedule allows them, so
    over any interval ``t`` the bytes let through stay below ``rate * t + burst``
    whatever the number of threads.
    """

    def __init__(self, rate: float, *, burst: float | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be > 0 bytes/s, got {rate!r}")
        self.rate = float(rate)
        # A small burst: 50 ms of the rate (at least 16 KiB) absorbs the jitter of
        # sleeping without letting a noticeable excess through.
        self.burst = float(burst) if burst is not None else max(16 << 10, self.rate * 0.05)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next = 0.0  # when the schedule is free again (clock seconds)
        # The most one read may book: a sixteenth of a second of the rate (16-128 KiB), so
        # all connections together are never more than that ahead of the limit.
        self.chunk = int(max(16 << 10, min(128 << 10, self.rate / 16)))

    def wait(self, n: int) -> None:
        """Block until ``n`` more bytes fit under the rate (returns at once for n <= 0)."""
        if n <= 0:
            return
        with self._lock:
            now = self._clock()
            start = max(self._next, now)
            self._next = start + n / self.rate
            delay = self._next - now - self.burst / self.rate
        if delay > 0:
            self._sleep(delay)

    def refund(self, n: int) -> None:
        """Give back ``n`` booked bytes that a read did not use."""
        if n <= 0:
            return
        with self._lock:
            self._next = max(self._next - n / self.rate, 0.0)


def parse_rate(text: str | float | int) -> float:
    """Bytes per second from ``2M``, ``500k``, ``1.5MiB``, ``100KB/s`` or a number.

    Units are powers of 1024, as in wget, curl and aria2c (``2M`` = 2 MiB/s).

    Raises:
        UsageError: not a positive rate.
    """
    from prefetch.errors import UsageError

    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        match = _RATE.match(str(text))
        if not match:
            raise UsageError(f"--limit-rate {text!r} is not a rate; use bytes per second like 2M, 500k or 100000")
        value = float(match[1]) * _UNITS[match[2].lower()]
    if not value >= 1:
        raise UsageError(f"--limit-rate must be at least 1 byte per second, got {text!r}")
    return value
