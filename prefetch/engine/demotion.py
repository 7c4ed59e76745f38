"""Dropping and demoting sources while a transfer runs (a part of ``transfer._Transfer``).

A source that disagrees with the others is dropped, and the bytes it served are
fetched again; a source far slower per connection than the fastest is demoted, its
connections ending so that the file finishes at the fastest source's speed.
"""

from __future__ import annotations

from prefetch.engine.sources import Source
from prefetch.net.urls import host_of, redact_url


class SourceHandling:
    """Mixed into ``_Transfer``: uses its lock, sources, schedule, done ranges and workers."""

    def drop_source(self, src: Source, reason: str, *, distrust: bool) -> bool:
        """Drop ``src`` if another source remains; un-mark what it served when ``distrust``."""
        with self.lock:
            if not self.sources.drop(src, reason):
                return False
            if distrust:
                # It disagreed with the others: bytes it already gave us are suspect.
                for lo, hi in src.served.as_list():
                    self.done.remove(lo, hi)
                    if lo < self.hash.hashed:
                        self.hash.reset()
                    self.schedule.add(lo, hi)
                    self.schedule.prune()
            self.dirty = True
        self.note(f"dropped source {redact_url(src.url)}: {reason}")
        return True

    def _demote_slow_source(self, now: float) -> None:
        """Stop asking a source that delivers far slower per connection than the fastest.

        Its connections end (what they received is kept) and take the faster sources;
        the file then finishes at the fastest source's speed, not waiting for the
        slow one's last pieces. Judged over ``demote_window`` seconds of delivery.
        """
        with self.lock:
            connections: dict[int, int] = {}
            for worker in self.answered:
                src = self.worker_source.get(worker)
                if src is not None:
                    connections[id(src)] = connections.get(id(src), 0) + 1
            rates = self.sources.rates(now, connections, self.opt.demote_window)
            pair = self.sources.to_demote(rates, self.opt.demote_ratio)
            if pair is None:
                return
            slow, fast = pair
            slow.demoted = "slow"
            responses = [r for w, r in self.responses.items() if self.worker_source.get(w) is slow]
            self.wake.notify_all()
        for resp in responses:
            resp.abort()  # its readers see ``quitting`` and hand their pieces back
        self.note(f"demoted source {redact_url(slow.url)}: {rates[id(slow)] / 1024:.0f} KiB/s per connection against "
                  f"{rates[id(fast)] / 1024:.0f} KiB/s from {host_of(fast.url)}; its pieces go to faster sources")
