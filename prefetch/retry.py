"""When to try again, and when a refusal means "fewer connections" rather than "wait".

Failures without progress back off exponentially with jitter (``Retry-After``
stretches the wait, up to a cap) and end the transfer after ``max_attempts`` in a
row; any byte that arrives resets the count. A 429/503 (twice) or a 403 (once) on
an extra connection while other connections to the same source deliver is a
per-client connection cap, not a failure: the transfer keeps the connections
that had answers.
"""

from __future__ import annotations

import random

from prefetch.errors import NetworkError

CROWDED = (429, 503)  # refusals that, while other connections deliver, mean "fewer connections"


class RetryPolicy:
    """Failures in a row and the server's refusals of one transfer (callers hold its lock)."""

    def __init__(self, opt) -> None:
        self.opt = opt
        self.in_a_row = 0
        self.refusals = 0  # 429/503 answers while other connections delivered
        self.crowded_at: int | None = None  # connections the server accepts, once it refused one more

    def progress(self) -> None:
        """Bytes arrived: the count of failures starts again."""
        self.in_a_row = 0

    def failed(self) -> int:
        """Count one more failure without progress; the attempts so far."""
        self.in_a_row += 1
        return self.in_a_row

    def delay(self, attempts: int, retry_after: float | None, *, name: str, message: str) -> float:
        """Seconds to wait before attempt ``attempts + 1``.

        Raises:
            NetworkError: ``max_attempts`` failures in a row: give up (the state allows a resume).
        """
        opt = self.opt
        if attempts > opt.max_attempts:
            raise NetworkError(
                f"{name}: gave up after {attempts - 1} retries without progress; last error: {message}. "
                f"Run the same command again to resume"
            )
        delay = min(opt.backoff_cap, opt.backoff_base * (2 ** (attempts - 1)))
        delay *= 0.75 + random.random() * 0.5
        if retry_after is not None:
            delay = max(delay, min(retry_after, opt.retry_after_cap))
        return delay

    def refused(self, *, delivering: int, live_sources: int, at_once: bool) -> tuple[int | None, bool]:
        """A request was refused while ``delivering`` other connections to its source deliver.

        The second 429/503 (or the first 403, which is never worth retrying) is taken as a
        per-client connection cap (many mirrors have one), not a hiccup or a forbidden
        file. Returns (connection limit or None when this refusal is not taken as a cap,
        whether it is the first cap found).
        """
        if not delivering:
            return None, False
        self.refusals += 1
        if self.refusals < 2 and not at_once:
            return None, False
        # Sources take workers in turn: the cap of this one bounds each source's share.
        limit = delivering * live_sources
        first = self.crowded_at is None
        self.crowded_at = limit if first else min(self.crowded_at, limit)
        return limit, first
