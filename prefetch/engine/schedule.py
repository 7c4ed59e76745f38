"""Who fetches which bytes, and with how many connections.

:class:`Schedule`: the segments still to fetch; a worker that runs out of work
splits the largest remaining one (work stealing), so faster sources and
connections carry more of the file. :class:`RouteJudge`: whether the route is long.
How many connections a file gets is ``engine/ramp.py``'s. Both are driven by the
transfer, under its lock.
"""

from __future__ import annotations

import time

from prefetch.engine.ranges import RangeSet
from prefetch.model.lean import dataclass


@dataclass
class Segment:
    """Bytes ``[pos, end)`` still to fetch of a piece that started at ``start``."""

    start: int
    pos: int
    end: int | None  # None: until the end of an unknown-size body
    owner: int | None = None  # the worker fetching it
    reading_to: int = 0  # the owner's read in flight may fill bytes up to here: never split below
    asked_to: int = 0  # the owner's request in flight ends here: a split below it would be streamed past
    asked_from: int = 0  # ... it started here ...
    asked_at: float = 0.0  # ... at this time (monotonic): the owner's own rate since
    ahead: bool = False  # the owner's next request went out before its answer ended (engine/ahead.py)


_MANY = 16  # connections from which one share is a small part of what is left (request_end)
_PACE = 1.0  # a request asks for about this many seconds of the connection's bytes (each costs ~2 ms of CPU) ...
_ROUND_TRIPS = 50  # ... or this many round trips, if longer: the wait for each answer stays ~2% (pace)
_LEAST_PIECE = 256 << 10  # the last round's pieces (even_end) are at least this long


class Schedule:
    """The pending and active segments of one transfer (callers hold the transfer's lock)."""

    def __init__(self, min_split: int) -> None:
        self.min_split = min_split
        self.segments: list[Segment] = []
        # On a long route requests are at most this long (None: as long as the gap): a
        # connection then moves on to the next piece, the faster ones take more pieces,
        # and the tail waits for one piece at most, never for a slow connection's half.
        self.piece: int | None = None
        # A split inside the range an owner already asked for cuts its answer short: the
        # server sends on until it sees the connection close, bytes nobody uses. Only for a
        # straggler: an owner that, at its own rate, needs more than this many seconds for
        # the rest of its answer (None: never).
        self.patience: float | None = None
        self.paced = 0  # bytes a connection reads in _PACE seconds lately (pace)
        self.reach = 0  # ... in max(_PACE, _ROUND_TRIPS round trips): a request's size on this route
        self.share = 0  # the last request's share of what is left (request_end; 0: none asked yet)
        # The few connections a capped server allows end together (even_end): set with its cap.
        self.even = False

    def pace(self, rate: float, round_trip: float | None, patience: float) -> None:
        """Each connection reads ``rate`` bytes/s lately and waits ``round_trip`` seconds for an answer
        on a kept-alive connection: size requests and pieces to that.

        Between two answers a connection idles one round trip: a request of a second's bytes on
        a 400 ms route idles ~30% of the time, 1 MiB pieces paced at 2 MiB/s on a 30 ms route
        ~6%. Asking for ``_ROUND_TRIPS`` round trips' worth keeps that at ~2%, within the
        connection's share of what is left (``request_end``: halves of halves toward the end);
        a short route keeps ``_PACE`` (nothing changes on loopback or a LAN). The round trip is
        the route's quickest answer (``RouteJudge.fastest``): a loaded machine only adds to it.
        """
        self.patience = patience
        self.paced = int(rate * _PACE)
        self.reach = int(rate * max(_PACE, _ROUND_TRIPS * (round_trip or 0.0)))

    def plan(self, size: int | None, done: RangeSet) -> None:
        """Pending segments for every gap (or one open-ended probe when size is unknown)."""
        if size is None:
            self.segments = [Segment(0, 0, None)]
        else:
            self.segments = [Segment(a, a, b) for a, b in done.missing(size)]

    def add(self, lo: int, hi: int) -> Segment:
        """Bytes ``[lo, hi)`` to fetch again (or a tail a short answer left)."""
        seg = Segment(lo, lo, hi)
        self.segments.append(seg)
        return seg

    def take(self, worker: int, *, splittable: bool, smallest: int, low_first: bool,
             besides: Segment | None = None) -> Segment | None:
        """Give ``worker`` a pending segment, or split the largest active one.

        Args:
            besides: a segment ``worker`` is still reading (its next request goes out before
                its answer ends, ``engine/ahead.py``): never split that one, nor any inside
                the range its owner asked for (a straggler's is split only once it is idle).
            splittable: the size is known and Range works.
            smallest: the smallest piece worth a new request.
            low_first: hashing needs a contiguous prefix: prefer splitting the lowest
                segment while it is not much smaller than the largest, so the prefix
                (and the hash) keep up with the download instead of waiting for the end.
        """
        pending = [s for s in self.segments if s.owner is None and (s.end is None or s.pos < s.end)]
        if pending:
            if self.piece and splittable:
                seg = min(pending, key=lambda s: s.pos)  # in file order: the hashed prefix grows
                self.join_pending(seg, pending)
                self.cut(seg, self.even_end(worker) or self.piece_size())
            else:
                seg = max(pending, key=lambda s: (s.end or 1 << 62) - s.pos)
            seg.owner = worker
            return seg
        if not splittable:
            return None
        active = [s for s in self.segments if s.owner is not None and s.end is not None and s is not besides]
        if not active:
            return None
        victim = max(active, key=lambda s: s.end - s.pos)
        if low_first:
            lowest = min(active, key=lambda s: s.pos)
            if 2 * (lowest.end - lowest.pos) >= victim.end - victim.pos:
                victim = lowest
        mid = self.split_point(victim, smallest, patient=besides is None)
        if mid is None:
            return None
        seg = Segment(mid, mid, victim.end, owner=worker)
        victim.end = mid
        self.segments.append(seg)
        return seg

    def piece_size(self) -> int:
        """A piece: ``piece`` bytes, or as many whole pieces as a request asks on this route (its
        ``reach``, within the last request's ``share``): a paced connection to a capped mirror
        idles a round trip per piece, and a piece longer than a request only makes odd ends."""
        if not self.piece:
            return 0
        reach = min(self.reach, self.share) if self.share else 0
        return self.piece * max(1, round(reach / self.piece))

    def even_end(self, worker: int) -> int | None:
        """Toward the end, the piece that keeps ``worker`` ending with the others (None: a whole piece).

        Only for the few connections a capped server allows (``even``). Each then reads about what
        every one has left: the bytes not yet read over the connections reading them (and
        ``worker``), less what ``worker`` still has of its own. From two pieces of that left, a
        connection takes half of it, so every one comes back for a last one sized to the others'
        (halves down to ``_LEAST_PIECE``, all sent ahead on the connection). Whole pieces ended
        the capped row's four connections up to a piece's time apart: the probe's connection,
        ~40 ms ahead of the others from the start, read 12.00 MiB as they did and idled while
        they finished.
        """
        if not self.even:
            return None
        live = [s for s in self.segments if s.end is not None and s.pos < s.end]
        owners = {s.owner for s in live if s.owner is not None} | {worker}
        mine = sum(s.end - s.pos for s in live if s.owner == worker)
        even = sum(s.end - s.pos for s in live) // len(owners) - mine
        if even >= 2 * self.piece_size():
            return None
        return even // 2 if even >= 4 * _LEAST_PIECE else max(even, _LEAST_PIECE)

    def join_pending(self, seg: Segment, pending: list[Segment]) -> None:
        """``seg`` (pending) grown over the pending segments right after it: pieces a capped server
        refused (503) come back one piece each, and taken so they stayed that long, a request per
        piece, when requests on the route had grown longer (``piece_size``)."""
        after = {s.pos: s for s in pending if s is not seg and s.end is not None}
        while seg.end is not None and (nxt := after.pop(seg.end, None)) is not None:
            seg.end = nxt.end
            self.segments.remove(nxt)

    def cut(self, seg: Segment, length: int) -> None:
        """Shorten ``seg`` to ``length`` bytes (not below half a piece more); the rest is pending."""
        if seg.end is not None and seg.end - seg.pos > length + length // 2:
            self.add(seg.pos + length, seg.end)
            seg.end = seg.pos + length

    def split_point(self, seg: Segment, smallest: int, *, patient: bool = True) -> int | None:
        """Where an active segment may be split, or None (take and has_work agree).

        A split pays when the half it takes away would take the owner longer than a new
        request costs: pieces are at least ``smallest``.
        """
        remaining = seg.end - seg.pos
        if remaining < 2 * smallest:
            return None
        # The owner's read in flight may fill bytes up to reading_to: split beyond that.
        mid = max(seg.pos + remaining // 2, seg.reading_to)
        # Its request asked for bytes up to asked_to: split beyond that too, so the owner
        # stops exactly at its new end, its whole answer read (nothing sent past it, the
        # connection kept alive); inside it only when the owner has long to go (the tail).
        if seg.end - max(mid, seg.asked_to) >= smallest:
            return max(mid, seg.asked_to)
        if mid >= seg.asked_to or self.patience is None or not patient or seg.ahead or seg.end - mid < smallest:
            return None  # (a cut with a request sent ahead would throw its answer away too)
        elapsed = time.monotonic() - seg.asked_at
        if elapsed < self.patience or seg.asked_to - seg.pos <= (seg.pos - seg.asked_from) / elapsed * self.patience:
            return None
        return mid

    def request_end(self, seg: Segment, start: int, *, remaining: int, workers: int, smallest: int,
                    least: int, most: int, paced: int | None = None, settled: bool = False,
                    reach: int | None = None) -> int:
        """Where a request for ``seg`` from ``start`` should end (exclusive): what this connection will fetch.

        A closed range sized to the connection's share of what is left and to ``paced``
        bytes (what the connection reads in a short while: no split needs to cut into
        it), between ``least`` (and two ``smallest`` pieces: the rest of a segment stays
        splittable for a new connection) and ``most``; the owner asks for the next one on
        the same connection when it is read. A split cuts into it only at the tail, from a
        slow owner (``split_point``, ``patience``).

        The share is ``remaining`` over twice the ``workers``: half of every segment stays
        unasked, for connections the ramp adds and for the ones that finish first to split
        without cutting into a range asked for. At the end, once the count is ``settled``
        on many connections (``_MANY``: one share is a small part of what is left) and each
        connection's whole share is at most ``paced`` (the connections finish together
        within about a second), a connection asks for its whole share in one
        request instead of halves of halves (a 200 MiB file at 32 connections: ~60
        requests instead of ~120, each costing ~1-1.5 ms of CPU). Earlier, a connection
        that finished first would find every byte asked for and split a range in flight:
        bytes the server streams past the cut (1 GiB over 2 connections: up to 1.07 x on a
        loaded machine; from 8: 1.006 x in 1 run of 15).

        ``reach`` (at least ``paced``): on a long route a window is up to what the connection
        reads in ``_ROUND_TRIPS`` round trips instead (see :meth:`pace`); "whole share at the
        end" is still judged on ``paced`` (connections finishing within about a second).
        Both default to what :meth:`pace` measured last.
        """
        paced = self.paced if paced is None else paced
        reach = self.reach if reach is None else reach
        full = settled and paced and workers >= _MANY and remaining // workers <= paced
        share = remaining // ((1 if full else 2) * max(1, workers))  # (workers: the most this transfer may run)
        self.share = share
        window = max(least, 2 * smallest, min(most, share, max(paced or 0, reach or 0) or most))
        runt = max(smallest, window // 2) if full else smallest
        if seg.end - (start + window) < runt:
            return seg.end  # never leave a runt for one more request (nor, at the end, for a steal)
        return start + window

    def has_work(self, smallest: int) -> bool:
        """A new worker would find something: a pending segment or one worth splitting."""
        if any(s.owner is None and s.end is not None and s.pos < s.end for s in self.segments):
            return True
        return any(s.owner is not None and s.end is not None and self.split_point(s, smallest) is not None
                   for s in self.segments)

    def release(self, seg: Segment) -> None:
        seg.owner = None
        self.prune()

    def prune(self) -> None:
        self.segments = [s for s in self.segments if s.end is None or s.pos < s.end or s.owner is not None]


def judge_clock(route) -> tuple[float, float] | None:
    """Before a request whose answer's latency ``route`` (a :class:`RouteJudge`) still judges:
    the calling thread's seconds on and waiting for a CPU (``fs.processes.thread_times``), for
    :func:`wire_time`; None once the verdict is formed (two reads of /proc saved a request)."""
    if len(route.samples) >= RouteJudge.SAMPLES:
        return None
    from prefetch.fs.processes import thread_times

    return thread_times()


def wire_time(latency: float, clock: tuple[float, float] | None) -> tuple[float, float | None]:
    """``latency`` less the time the calling thread, its answer arrived, waited for a CPU since
    ``clock`` (:func:`judge_clock`): the route's wait, not the run queue's; and that wait (None:
    not measured). On a loaded machine a first answer came 80-170 ms after its request on a 30 ms
    route (60 ms quiet), past twice the long-route mark: the route was judged long at once and 32
    connections opened. (The wait also tells the route judge whether a late answer was the
    machine's: ``engine.near.SharedRouteJudge``.)"""
    if clock is None:
        return latency, None
    from prefetch.fs.processes import thread_times

    now = thread_times()
    if now is None:
        return latency, None
    waited = max(0.0, now[1] - clock[1])
    return max(0.0, latency - waited), waited


class RouteJudge:
    """Is the route long? The first answers' latencies (request to first byte) say.

    A first answer twice ``threshold`` or slower is a long route at once (a new
    connection's first answer is two round trips, the handshake's and the request's, so
    a route of ``threshold`` round trip or more; a busy machine seldom delays loopback
    that much, and when it does the next answers turn it back, see :class:`Ramp`);
    a first answer merely above ``threshold`` waits for the next few ("long?"). The
    median of the first few answers confirms "long" or turns it "short" (one slow
    answer from a loaded machine is not a route abroad). ``route`` is None before any answer.
    """

    SAMPLES = 5

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self.route: str | None = None
        self.samples: list[float] = []
        # The quickest answer yet, of every answer: a request on a kept-alive connection, so
        # the route's round trip (a loaded machine only ever adds to it).
        self.fastest: float | None = None
        # The least round trip the kernel measured on a connection that answered (TCP_INFO), or None.
        self.kernel_rtt: float | None = None

    def add(self, latency: float, rtt: float | None = None, waited: float | None = None) -> str | None:
        """One answer ``latency`` seconds after its request (its thread's wait for a CPU left out),
        on a connection whose kernel round trip is ``rtt``; ``waited``: that thread's wait (the
        shared judge of a host weighs it, ``engine.near.SharedRouteJudge``). The verdict so far."""
        if rtt is not None and (self.kernel_rtt is None or rtt < self.kernel_rtt):
            self.kernel_rtt = rtt
        if self.fastest is None or latency < self.fastest:
            self.fastest = latency
        if len(self.samples) >= self.SAMPLES:
            return self.route
        self.samples.append(latency)
        if self.route is None:
            if latency >= 2 * self.threshold:
                self.route = "long"
            else:
                self.route = "long?" if latency >= self.threshold else "short"
        elif self.route in ("long?", "long") and len(self.samples) >= 3:
            middle = sorted(self.samples)[len(self.samples) // 2]
            if middle >= self.threshold:
                self.route = "long"
            elif middle < self.threshold / 2:
                self.route = "short"
        return self.route

    @property
    def long(self) -> bool:
        return self.route == "long"
