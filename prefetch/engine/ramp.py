"""How many connections a file gets, and the rate it is measured at.

:class:`Ramp`: the connection count when the user did not say (doubling while it pays,
halving where the machine is the limit); :class:`RateMeter`: a recent rate. Both are driven
by the transfer, under its lock (``engine/transfer.py``); the route's verdict comes from
``engine/schedule.RouteJudge``.
"""

from __future__ import annotations

from collections import deque


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
    ``one_connection_rate`` (a polite background job's), the probe's connection is first
    watched alone (``_watch_one``): one that fast on a short route starts the climb from
    one connection instead of ``initial_connections``, and a descent may end at one; one
    held back by a CPU other work keeps busy stays the only one.

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
    _BUSY_WAIT = 0.5  # seconds waiting for a CPU per second of the watch: other work holds the machine

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
        self.one: tuple[float, int, dict | None] | bool | None = None if opt.one_connection_rate else False
        self.fewest = self._FEWEST  # the fewest connections a descent goes to (1 once started from one)

    @property
    def watching(self) -> bool:
        """The probe's connection is (or is about to be) watched alone: ``update`` wants ``sched``."""
        return self.one is not False

    def update(self, now: float, downloaded: int, *, alive: int, answered: int, latency: float,
               route: str | None = None, cpu: float | None = None,
               sched: dict[int, tuple[float, float]] | None = None) -> int:
        """The connection count to run now.

        ``route``: from :class:`RouteJudge` (None before the first answer); ``cpu``: the
        process's CPU seconds so far (``time.process_time()``; None: unknown, never busy);
        ``sched``: while ``watching``, its threads' seconds on a CPU and waiting for one
        (``fs.processes.cpu_and_wait``; None: unknown).
        """
        if self.one is not False:
            watched = self._watch_one(now, downloaded, route, sched)
            if watched is not None:
                return watched
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

    def _watch_one(self, now: float, downloaded: int, route: str | None,
                   sched: dict[int, tuple[float, float]] | None) -> int | None:
        """One connection while the probe's is watched alone (None: go on).

        On loopback or a LAN one connection moves several hundred MB/s and every added one
        costs threads and wake-ups for nothing: on this 2-core VM a training loop beside a
        1 GiB background job lost 1% with one connection (573 MB/s) against 5-7% with the
        ramp's 8-16 (540 MB/s). A connection that fast shows it within a few hundredths of
        a second, so the ramp then starts from one (and climbs only while doubling pays); a
        throttled one (a CDN's 10 MB/s) starts from ``initial_connections`` as before, a
        tenth of a second later (which is why only background jobs watch: a foreground
        download on a throttled link would pay that wait).

        On a machine busy with other work (the training a polite job runs beside) the job,
        at nice 19, gets the CPU a fraction of the time and no connection brings 200 MB/s:
        the rate alone sent it up the ramp to 8 connections, 8 threads asking for the CPU
        the training holds (or, its answers read late, took the route for a long one and
        opened 12). So the watch, on any route, also reads its threads' seconds on a CPU and
        waiting, runnable, for one (``sched``): waiting for it at least half the window
        (``_BUSY_WAIT``, summed over threads) and longer than they ran, the job waits for the
        CPU other work holds, not for the network: it stays at one connection. Otherwise a
        long or uncertain route goes the ramp's own way, its jump a tenth of a second later.
        """
        if route is None:
            return 1  # no answer judged yet
        if self.one is None:
            self.one = (now, downloaded, sched)
            return 1
        start, base, sched_base = self.one
        if now - start < self._ONE_WATCH and downloaded - base < self._ONE_BYTES:
            return 1
        self.one = False
        took = max(now - start, 1e-6)
        if sched is not None and sched_base is not None:
            both = sched.keys() & sched_base.keys()  # (a thread that ended took its seconds with it)
            ran = sum(sched[k][0] - sched_base[k][0] for k in both)
            waited = sum(sched[k][1] - sched_base[k][1] for k in both)
            if waited / took >= self._BUSY_WAIT and waited > ran:
                # More threads would only ask for the CPU the other work holds: one, for good
                # (no climb, no long-route jump: its answers were late for want of the CPU).
                self.target = self.fewest = 1
                self.done = self.judged_route = True
                return 1
        if route == "short" and (downloaded - base) / took >= self.opt.one_connection_rate:
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
