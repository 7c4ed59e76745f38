"""What a worker calls on its transfer: may it go on, write these bytes, trust them, take a segment.

A mixin of ``transfer._Transfer``: the connection side of a transfer (``fetcher.py``, and
``ahead.py`` for a request sent ahead) reaches the transfer only through these methods, and
each takes the transfer's lock where it reads or changes shared state. Bytes are written
without the lock (``write_at``) and trusted only once ``record`` accepts them for the
generation that asked for them.
"""

from __future__ import annotations

from typing import Callable

from prefetch.engine.schedule import Segment
from prefetch.engine.sources import Source


class WorkerCalls:
    """The worker-facing half of a transfer (its attributes are the transfer's own)."""

    # -- workers -----------------------------------------------------------
    inline_tick: Callable[[], None] | None = None  # progress while the first request runs inline
    first_answer = None  # engine.single.Handover: the first request's answer (or failure), already in

    def steps_back_locked(self, worker: int) -> bool:
        """More workers run than the server accepts (``worker_limit``): is ``worker`` one to go?

        Workers that never had an answer go first (refused ones, waiting out a backoff); one
        that delivers goes only when those are not enough. Callers hold the lock.
        """
        if self.worker_limit is None or self.active_workers <= self.worker_limit:
            return False
        if worker not in self.answered:
            return True
        unanswered = self.active_workers - len(self.answered)
        return self.active_workers - self.worker_limit > unanswered

    def asking(self, worker: int) -> bool:
        """Workers other than ``worker`` wait for their first answer (a request out, neither
        answered nor refused: those wait out a pause)."""
        with self.lock:
            mine = 0 if worker in self.answered else 1
            return self.active_workers - len(self.answered) - self.pausing - mine > 0

    def quitting(self, src: Source, generation: int) -> bool:
        """A worker's read loop should end now (asked before each read)."""
        if self.inline_tick is not None:
            self.inline_tick()
        return bool(self.stop.is_set() or self.generation != generation or self.fatal or self.restart
                    or src.dropped or src.demoted)

    def write_at(self, data, pos: int, generation: int) -> bool:
        """``pwrite`` at ``pos``; False when this generation is over (nothing written).

        No lock: the fd stays open while any worker runs (the last one to leave closes
        it), and bytes are trusted only once ``record`` accepts them.
        """
        if self.closing or self.generation != generation:
            return False
        self.file.write_at(data, pos, needed=self._remaining)
        return True

    def write_from_pipe(self, pipe, n: int, pos: int, generation: int) -> bool:
        """:meth:`write_at` for ``n`` bytes spliced into ``pipe`` (``net/splice.py``)."""
        if self.closing or self.generation != generation:
            return False
        self.file.write_from_pipe(pipe, n, pos, needed=self._remaining)
        return True

    def record(self, seg: Segment, src: Source, pos: int, n: int, generation: int) -> bool:
        """Bytes ``[pos, pos + n)`` are on disk; False when they are not to be trusted."""
        with self.lock:
            if src.dropped or self.generation != generation:
                return False
            self.done.add(pos, pos + n)
            src.served.add(pos, pos + n)
            src.delivered += n
            seg.pos = pos + n
            self.downloaded += n
            self.retries.progress()
            src.failures = 0
            self.dirty = True
            # Wake the hash loop when the contiguous prefix grew, the main loop when the
            # file is complete; not on every read (a wake per read costs real CPU).
            if (self.algorithm and self.done.prefix_end() == pos + n) or self._finished_locked():
                self.wake.notify_all()
        return True

    def body_ended(self, seg: Segment, pos: int) -> None:
        """A body of unknown length ended at ``pos``: that is the size."""
        with self.lock:
            if self.size is None:
                self.size = pos
                self.dirty = True
            seg.end = pos

    def note_latency(self, latency: float, rtt: float | None = None, waited: float | None = None) -> None:
        """An answer came ``latency`` seconds after its request, on a connection whose kernel round
        trip is ``rtt`` (None: not known), its thread having waited ``waited`` seconds for a CPU
        meanwhile (None: not measured) (callers hold the lock)."""
        self.latency = latency if self.latency is None else 0.7 * self.latency + 0.3 * latency
        self.route.add(latency, rtt, waited)
        # A long route asks in pieces, when the connection count is ours to choose
        # (--connections N asks for N requests' worth of segments, as before).
        pieces = self.route.long and self.opt.connections is None
        if pieces or self.retries.crowded_at is None:  # (a capped server keeps its pieces)
            self.schedule.piece = self.opt.piece_size if pieces else None

    # -- scheduling --------------------------------------------------------
    def _smallest_piece(self) -> int:
        """A split must save more than a new request costs: at least latency x rate per piece."""
        return max(self.opt.min_split, int(self.conn_rate * (self.latency or 0.0)))

    def take_segment(self, worker: int) -> Segment | None:
        with self.lock:
            if self._finished_locked() or self.fatal or self.restart:
                return None
            return self.schedule.take(worker, splittable=self._splittable_locked(),
                                      smallest=self._smallest_piece(), low_first=self.hash.hasher is not None)

    def _splittable_locked(self) -> bool:
        return self.size is not None and self.ranges_ok and self.sources.pinned is None

    def _has_work(self) -> bool:
        with self.lock:
            if not self._splittable_locked():
                return False
            return self.schedule.has_work(self._smallest_piece())

    def release(self, seg: Segment) -> None:
        with self.lock:
            self.schedule.release(seg)

    def _finished_locked(self) -> bool:
        return self.size is not None and self.done.covers(self.size)
