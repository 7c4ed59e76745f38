"""When to try again, and when a refusal means "fewer connections" rather than "wait".

Failures without progress back off exponentially with jitter (``Retry-After``
stretches the wait, up to a cap) and end the transfer after ``max_attempts`` in a
row (``--retries``), or once no byte has arrived for ``timeout`` seconds
(``--timeout``; a third of it for a name that does not resolve, a refused
connection or a web page, which seconds do not mend); any byte that arrives
resets both. Connections whose try began before another's failure and that then fail too
(a server restarted, a NAT or proxy dropping its table: every connection reset at once) are
that failure's wave: one failure of the transfer, not one each. Counted one by one, twelve
connections reset together were twelve retries in a row at once, and the download gave up
at once; a try begun after the wave's first failure (a retry) counts again, so a server that
keeps failing still ends the transfer after ``max_attempts`` waves.
A server that answers (429, 5xx) is alive: only the count applies. A 429/503 (twice) or a 403 (once) on
an extra connection while other connections to the same source deliver is a
per-client connection cap, not a failure: the transfer keeps the connections
that had answers. A cap is not for ever: after ``cap_retry`` seconds without a
refusal one more connection is tried (:meth:`RetryPolicy.relax`), and each raise that held
shortens the next wait and doubles the next step (``engine/recovery.py``), so a storm of 503s
at the start does not hold a long download at its low count; a real cap refuses the
extra one and stays, at one refused request per ``cap_retry``.
"""

from __future__ import annotations

import random
import time

from prefetch.engine.recovery import CapRecovery
from prefetch.errors import NetworkError
from prefetch.net.failures import Failure
from prefetch.net import unreachable, unresolved

CROWDED = (429, 503)  # refusals that, while other connections deliver, mean "fewer connections"


class RetryPolicy:
    """Failures in a row and the server's refusals of one transfer (callers hold its lock)."""

    def __init__(self, opt, host=None) -> None:
        self.opt = opt
        self.host = host  # engine.hosts.Host of the transfer's one source (None: several, or none shared)
        self.in_a_row = 0
        self.refusals = 0  # 429/503 answers while other connections delivered
        self.crowded_at: int | None = None  # connections the server accepts, once it refused one more
        self.recovery = CapRecovery()  # when the cap is tried higher again
        self.progress_at = time.monotonic()  # when the last byte arrived (or the transfer started)
        self.wave_start = 0.0  # when the last failure counted happened (a try begun before it is of its wave)
        self.unresolved: list = []  # (host, errno, text) of each lookup that failed, sources dropped for it too
        self.unreached: list = []  # (host, port, errno, text) of each connect refused at once, the same way

    def progress(self) -> None:
        """Bytes arrived: the count of failures starts again."""
        self.in_a_row = 0
        self.progress_at = time.monotonic()

    def failed(self, began: float | None = None) -> int:
        """Count one more failure without progress; the attempts so far. ``began``: when the
        failed try began (``time.monotonic()``); one begun before the last counted failure is of
        its wave: the same attempt, not one more."""
        if began is not None and self.in_a_row and began < self.wave_start:
            return self.in_a_row
        self.in_a_row += 1
        self.wave_start = time.monotonic()
        return self.in_a_row

    def delay(self, attempts: int, retry_after: float | None, *, name: str, message: str,
              kind: str = Failure.BROKEN, fresh: bool = True, error=None) -> float:
        """Seconds to wait before attempt ``attempts + 1``.

        ``fresh``: no byte of the file arrived in this run yet (only such a transfer gives up at
        its first failure on a host another file just gave up on: one that delivers keeps its retries).
        ``error``: the TransientHTTPError (a name that does not resolve while nothing was reached
        gives up sooner, saying so: ``net/unresolved.py``; so does a connect refused or
        unreachable at once to a host never reached: ``net/unreachable.py``).

        Raises:
            NetworkError: ``max_attempts`` failures in a row, or no byte for the time
            budget of this kind of failure: give up (the state allows a resume).
        """
        opt = self.opt
        if kind == Failure.WEB_PAGE:
            message = message.removesuffix(")") + ", then run the same command again)"
        host = self.host
        if error is not None and (error.unresolved is not None or error.unreached is not None):
            budget = self.budget(kind)
            over = attempts > opt.max_attempts or (budget is not None and time.monotonic() - self.progress_at >= budget)
            now = over or (host is not None and host.given_up and fresh)  # (giving up anyway: said the same way)
            if error.unresolved is not None:
                line = unresolved.verdict(self.unresolved, attempts, proxy=error.proxy, now=now)
            else:
                line = unreachable.verdict(self.unreached, attempts, proxy=error.proxy, now=now)
            if line is not None:  # (its advice is for a network that is off: running it again would not mend it)
                self._host_gave_up()
                raise NetworkError(f"{name}: {line}")
        if host is not None and host.given_up and fresh and kind != Failure.WEB_PAGE:
            # Another file to this host used its retries (or its --timeout) without a byte, and no
            # file came from the host since: this one does not wait through its own (a list of
            # 2,000 files to a host down with 503s took 2,000 x ~90 s of backoff, not minutes).
            raise NetworkError(
                f"{name}: {message}; not retried: another file to this host just gave up after its retries "
                f"and none came from it since. Run the same command again to resume"
            )
        if attempts > opt.max_attempts:
            if kind == Failure.WEB_PAGE:
                raise NetworkError(f"{name}: {message}")
            self._host_gave_up()
            raise NetworkError(
                f"{name}: gave up after {attempts - 1} retries without progress; last error: {message}. "
                f"Run the same command again to resume"
            )
        delay = min(opt.backoff_cap, opt.backoff_base * (2 ** (attempts - 1)))
        delay *= 0.75 + random.random() * 0.5
        if retry_after is not None:
            delay = max(delay, min(retry_after, opt.retry_after_cap))
        budget = self.budget(kind)
        waited = time.monotonic() - self.progress_at
        if budget is not None and waited + delay > budget:
            if kind == Failure.WEB_PAGE:
                raise NetworkError(f"{name}: {message}")
            self._host_gave_up()
            raise NetworkError(
                f"{name}: gave up after {waited:.0f}s without a byte ({attempts} tries, --timeout {opt.timeout:g}); "
                f"last error: {message}. Run the same command again to resume"
            )
        return delay

    def _host_gave_up(self) -> None:
        """This transfer gives up on its one source: its host's next files do at their first failure."""
        if self.host is not None:
            self.host.given_up = True

    def budget(self, kind: str) -> float | None:
        """Seconds without a byte after which failures of ``kind`` end the transfer (None: no limit)."""
        if kind == Failure.STATUS:
            return None
        if kind in (Failure.UNREACHABLE, Failure.WEB_PAGE):
            return self.opt.timeout / 3
        return self.opt.timeout

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
        self.recovery.lowered(time.monotonic())
        return limit, first

    def relax(self, now: float, after: float, most: int) -> int | None:
        """A higher cap once ``after`` seconds passed without a refusal (0: never; sooner and
        by more after raises that held: ``CapRecovery``), up to ``most``; the new cap, or None
        when it stays."""
        if self.crowded_at is None:
            return None
        raised = self.recovery.due(now, after, self.crowded_at, most)
        if raised is not None:
            self.crowded_at = raised
        return raised
