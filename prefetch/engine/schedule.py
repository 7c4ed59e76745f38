"""Who fetches which bytes, and with how many connections.

:class:`Schedule`: the segments still to fetch; a worker that runs out of work
splits the largest remaining one (work stealing), so faster sources and
connections carry more of the file. :class:`Ramp`: how many connections the file
gets when the user did not say. Both are driven by the transfer, under its lock.
"""

from __future__ import annotations

import time
from collections import deque

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
                self.cut(seg, self.piece_size())
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

    def add(self, latency: float) -> str | None:
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


class Ramp:
    """How many connections a file gets when ``--connections`` is not given.

    Start at ``initial_connections`` and double, up to ``max_connections``, while the
    added connections pay: a step is judged only once every running worker has had
    an answer (on a 200 ms route a new connection needs a few round trips before it
    delivers anything), then over ``ramp_interval`` seconds; when that window's rate
    beats the previous step's by ``ramp_gain`` it doubles again. Per-connection
    throttling (most CDNs, long fat routes) rewards every connection and the ramp runs
    to the cap. On a long route it does not step: it opens ``long_route_connections``
    together as soon as the first answer shows the route.

    A doubling that brings nothing (less than ``_NO_GAIN``: the link, or the CPU, was
    already the limit) goes back to the count before it and then halves while halving
    costs less than ``ramp_gain`` of the rate, down to ``_FEWEST``: on loopback or a LAN,
    where a connection is limited by the machine's CPU, not by the network, two
    connections move the bytes as fast as sixteen for a fraction of the CPU. With
    ``one_connection_rate`` (a polite background job's), the probe's connection on a
    short route is first watched alone (``_watch_one``): one that fast starts the climb
    from one connection instead of ``initial_connections``, and a descent may end at one.

    A window shows a gain soon, but a verdict that lowers the count or stops the climb
    needs more: the process busy on the CPU through the window (``cpu``: its CPU seconds,
    then the limit is the machine and its rates are smooth), else a window of
    ``_SURE_WINDOW``. Per-connection throttles (nginx's ``limit_rate``, CDN token
    buckets) deliver in bursts on whole seconds: a tenth of a second sees nothing or
    twice the rate, and a climb judged on it stepped down to 2-4 connections on a link
    that gives each one 10 MB/s (200 MiB in 3.6 s instead of 1.2 s).
    """

    _NO_GAIN = 1.05
    _FEWEST = 2
    _ONE_WATCH = 0.1  # seconds the probe's connection is watched alone on a short route ...
    _ONE_BYTES = 8 << 20  # ... or until it has brought this much
    _SURE_WINDOW = 1.0  # seconds of a step before "more connections do not pay" is believed
    _CPU_BOUND = 0.85  # CPU seconds per second of the window: the machine is the limit

    def __init__(self, opt) -> None:
        self.opt = opt
        self.target = min(opt.initial_connections, opt.max_connections)
        self.done = self.target >= opt.max_connections
        self.judged_route = False
        self.jumped = False
        self.step_started: float | None = None
        self.window: tuple[float, int, float | None] | None = None  # (start, bytes downloaded, CPU seconds then)
        self.last_rate: float | None = None
        self.descending = False  # halving: more connections did not pay
        # The probe's connection alone on a short route: None before it is watched, then
        # (start, bytes then), then False once judged (see _watch_one).
        self.one: tuple[float, int] | bool | None = None if opt.one_connection_rate else False
        self.fewest = self._FEWEST  # the fewest connections a descent goes to (1 once started from one)

    def update(self, now: float, downloaded: int, *, alive: int, answered: int, latency: float,
               route: str | None = None, cpu: float | None = None) -> int:
        """The connection count to run now.

        ``route``: from :class:`RouteJudge` (None before the first answer); ``cpu``: the
        process's CPU seconds so far (``time.process_time()``; None: unknown, never busy).
        """
        if not self.judged_route and route == "long":
            # Round trips this long make every connection window- or throttle-bound, and
            # each step would cost seconds to judge: open the long-route count together.
            self.judged_route = self.jumped = True
            self.target = max(self.target, min(self.opt.max_connections, self.opt.long_route_connections))
            self.done = self.target >= self.opt.max_connections
            self.descending = False
        if self.jumped and route == "short":
            # The first answer was slow by accident (a loaded machine), the next ones are
            # not: back to stepping from the start.
            self.jumped = False
            self.target = min(self.opt.initial_connections, self.opt.max_connections)
            self.done = self.target >= self.opt.max_connections
            self.step_started = self.window = self.last_rate = None
        if self.one is not False and not self.jumped:
            watched = self._watch_one(now, downloaded, route)
            if watched is not None:
                return watched
        if self.done:
            return self.target
        if self.step_started is None:
            self.step_started = now
        if self.window is None:
            if self.descending:
                settled = alive <= self.target  # the connections beyond the count have stepped back
            else:
                settled = alive >= self.target and answered >= alive
            if settled or now - self.step_started > 20 * max(self.opt.ramp_interval, latency):
                self.window = (now, downloaded, cpu)
            return self.target
        start, base, cpu_base = self.window
        if now - start < max(self.opt.ramp_interval, 4 * latency):  # several round trips
            return self.target
        rate = (downloaded - base) / (now - start)
        # May a verdict against more connections be drawn from this window yet?
        busy = cpu is not None and cpu_base is not None and (cpu - cpu_base) / (now - start) >= self._CPU_BOUND
        sure = busy or now - start >= self._SURE_WINDOW
        if self.descending:
            return self._descend(now, rate, sure)
        if alive < self.target:
            self.done = True  # not enough work left to split
            return self.target
        if self.last_rate is not None and rate < self.last_rate * self.opt.ramp_gain:
            if not sure:
                return self.target  # a burst's gap, perhaps: measure on
            self.done = True  # the last step did not pay
            if rate < self.last_rate * self._NO_GAIN and route != "long":
                current, before = self.target, self.target // 2
                if busy:
                    # It brought nothing and the CPU is the limit (smooth rates): the count
                    # before it is as good; try half of that.
                    self.target = max(self.fewest, before // 2)
                    self.last_rate = max(rate, self.last_rate)
                else:
                    # Judged on a long window against a step judged on a short one (which a
                    # burst may have inflated): judge the count before on a long window too.
                    self.target = max(self.fewest, before)
                    self.last_rate = rate
                if self.target < current:
                    self.descending, self.done = True, False
                    self._next_step(now)
            return self.target
        self.last_rate = rate
        self.target = min(self.opt.max_connections, self.target * 2)
        self.done = self.target >= self.opt.max_connections
        self._next_step(now)
        return self.target

    def _watch_one(self, now: float, downloaded: int, route: str | None) -> int | None:
        """One connection while the probe's is watched alone on a short route (None: go on).

        On loopback or a LAN one connection moves several hundred MB/s and every added one
        costs threads and wake-ups for nothing: on this 2-core VM a training loop beside a
        1 GiB background job lost 1% with one connection (573 MB/s) against 5-7% with the
        ramp's 8-16 (540 MB/s). A connection that fast shows it within a few hundredths of
        a second, so the ramp then starts from one (and climbs only while doubling pays); a
        throttled one (a CDN's 10 MB/s) starts from ``initial_connections`` as before, a
        tenth of a second later (which is why only background jobs watch: a foreground
        download on a throttled link would pay that wait).
        """
        if route is None:
            return 1  # no answer judged yet
        if route != "short":
            self.one = False  # a long or uncertain route: the ramp's own way
            return None
        if self.one is None:
            self.one = (now, downloaded)
            return 1
        start, base = self.one
        if now - start < self._ONE_WATCH and downloaded - base < self._ONE_BYTES:
            return 1
        self.one = False
        if (downloaded - base) / max(now - start, 1e-6) >= self.opt.one_connection_rate:
            self.target = self.fewest = 1
            self.done = self.target >= self.opt.max_connections
        return None

    def _descend(self, now: float, rate: float, sure: bool) -> int:
        """Judged a halved count: keep halving while it costs little, else back up and stop."""
        if self.last_rate is not None and rate * self.opt.ramp_gain < self.last_rate:
            self.target *= 2  # that halving cost rate: the count before it was right
            self.done = True
            return self.target
        if not sure:
            return self.target  # halving looks free; fewer connections only once that is sure
        self.last_rate = max(rate, self.last_rate or 0.0)
        if self.target <= self.fewest:
            self.done = True
            return self.target
        self.target = max(self.fewest, self.target // 2)
        self._next_step(now)
        return self.target

    def _next_step(self, now: float) -> None:
        self.step_started, self.window = now, None


class RateMeter:
    """Smoothed rate over a sliding window of a few seconds."""

    def __init__(self, window: float = 3.0) -> None:
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def update(self, now: float, done: int) -> float:
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window:
            self.samples.popleft()
        t0, d0 = self.samples[0]
        return (done - d0) / (now - t0) if now > t0 else 0.0
