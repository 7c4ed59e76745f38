"""When a connection cap a server set is tried higher again.

A 429/503 on an extra connection while others deliver lowers a cap: a host's
(:mod:`prefetch.engine.hosts`) or one transfer's (:mod:`prefetch.engine.retry`). Servers
refuse for two reasons: a real per-client cap (a mirror allowing 4 connections an address),
or a passing storm (an overloaded CDN node at the start of a run). The first must cost little:
one refused request per ``after`` seconds. The second must not hold a long download at one
connection: ``after`` seconds without a refusal bring one connection more, and each raise
that held (no refusal before the next one is due) halves the next wait (to ``after / 8`` at
least) and doubles the next step. A cap of 1 with ``after`` 60 s is back at 16 connections
after about 113 s (60 + 30 + 15 + 7.5), not 15 minutes; a refusal starts over at ``after``
and one more. Pure bookkeeping (callers hold their own lock); imports nothing of prefetch.
"""

from __future__ import annotations

SHORTEST = 3  # the wait halves at most this many times (after / 8)


class CapRecovery:
    """The raises of one lowered cap: when the next is due and how big it is."""

    def __init__(self) -> None:
        self.since = 0.0  # when the cap was last lowered or raised (monotonic)
        self.held = 0  # raises in a row that no refusal followed

    def lowered(self, now: float) -> None:
        """The server refused again: the next raise after the full wait, by one."""
        self.since = now
        self.held = 0

    def wait(self, after: float) -> float:
        """Seconds from the last change to the next raise."""
        return after / (1 << min(self.held, SHORTEST))

    def due(self, now: float, after: float, cap: int, most: int) -> int | None:
        """The raised cap when a raise is due now (``after`` 0: never; never above ``most``),
        else None."""
        if after <= 0 or cap >= most or now - self.since < self.wait(after):
            return None
        raised = min(most, cap + (1 << self.held))
        self.held += 1
        self.since = now
        return raised
