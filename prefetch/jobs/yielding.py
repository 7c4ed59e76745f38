"""A polite job's share of the CPU: slower while other processes need it.

Nice 19 keeps a background job's own threads behind a training loop, but not the work
done on its behalf elsewhere: the kernel receiving its bytes and filling the page cache,
a server on the same machine. On a 2-core notebook that work alone slowed a one-thread
training loop by 4-7% at 500 MB/s. ``Yielder`` samples the machine four times a second
(``/proc/stat``: the CPU time left idle, and what other processes used, this process's
own time taken out) and steers the job's ``RateLimiter``:

* **tight** (less than ``TIGHT_IDLE`` of one CPU idle, while other processes use more
  than ``OTHERS_BUSY`` of one, and the job itself more than ``OWN_BUSY``): the limit goes
  to 3/4 of what the job reads now (or of its limit), never below what ``FLOOR_SHARE`` of
  one CPU downloads at the job's own cost per byte, nor below ``FLOOR_RATE``; the first
  interval, with the engine's start-up in it, is never judged;
* **roomy** (more than ``ROOMY_IDLE`` of one CPU idle): the limit rises by half and is
  lifted once it is above 1.2x the fastest rate the job reached unlimited;
* in between it holds.

A slow route never makes the job a rival, so only fast links are steered. Linux only
(``/proc/stat``); elsewhere ``start_yielding`` returns None and the job is unsteered.
The user turns it off with the priority: ``--no-nice`` or ``PREFETCH_NICE=0``.

Layer: ``jobs``. Imports ``engine.ratelimit`` and the standard library only.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from prefetch.engine.ratelimit import RateLimiter

PERIOD = 0.25  # seconds between samples
TIGHT_IDLE = 0.2  # CPUs idle: below this (and others busy), yield
OTHERS_BUSY = 0.5  # CPUs other processes use: above this (and little idle), yield
OWN_BUSY = 0.1  # CPUs this job uses: below this it is no rival worth yielding for
ROOMY_IDLE = 0.5  # CPUs idle: above this, take more
FLOOR_SHARE = 0.05  # a yielding job still gets what this share of one CPU downloads
FLOOR_RATE = 4 << 20  # and at least this many bytes/s
DOWN, UP = 0.75, 1.5
NOTE_EVERY = 30.0  # seconds: at most one note of each kind this often


@dataclass(frozen=True)
class Sample:
    """Cumulative counters at one moment (seconds of CPU time, bytes)."""

    wall: float
    busy: float  # every CPU's non-idle time
    idle: float  # every CPU's idle and I/O-wait time
    own: float  # this process's CPU time
    passed: int  # bytes the job's connections read


@dataclass
class Steer:
    """What the yielder knows between samples; ``step`` updates it."""

    limit: float | None = None  # bytes/s, None: unlimited
    peak: float = 0.0  # the fastest rate seen unlimited
    per_cpu: float = 0.0  # bytes the job downloads per CPU second, unlimited (smoothed)
    idle: float = 0.0  # CPUs idle in the last interval
    others: float = 0.0  # CPUs other processes used in the last interval
    steps: int = 0  # intervals seen (the first, with the engine's start-up, never yields)


def step(state: Steer, before: Sample, now: Sample) -> float | None:
    """The new limit after the interval ``before``..``now`` (None: unlimited); updates ``state``."""
    dt = now.wall - before.wall
    if dt <= 0:
        return state.limit
    own = max(0.0, now.own - before.own) / dt
    state.idle = max(0.0, now.idle - before.idle) / dt
    state.others = max(0.0, now.busy - before.busy) / dt - own
    rate = max(0, now.passed - before.passed) / dt
    if state.limit is None and own > OWN_BUSY:  # the job's cost per byte at its own pace
        per_cpu = rate / own
        state.per_cpu = per_cpu if not state.per_cpu else 0.7 * state.per_cpu + 0.3 * per_cpu
    if state.limit is None:
        state.peak = max(state.peak, rate)
    floor = max(FLOOR_RATE, FLOOR_SHARE * state.per_cpu)
    state.steps += 1
    tight = state.idle < TIGHT_IDLE and state.others > OTHERS_BUSY
    if tight and state.steps > 1 and (state.limit is not None or (own > OWN_BUSY and rate > floor)):
        base = rate if state.limit is None else min(state.limit, max(rate, floor))
        lower = max(floor, DOWN * base)
        if state.limit is None or lower < state.limit:
            state.limit = lower
    elif state.idle > ROOMY_IDLE and state.limit is not None:
        higher = UP * state.limit
        state.limit = None if not state.peak or higher > 1.2 * state.peak else higher
    return state.limit


def machine_cpu() -> tuple[float, float] | None:
    """(busy, idle) CPU seconds of every CPU since boot, from ``/proc/stat``; None where it cannot be read."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 5 or fields[0] != b"cpu":
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = ticks[3] + ticks[4]
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - idle) / hz, idle / hz


class Yielder:
    """A thread steering ``limiter`` from the machine's CPU use; ``note`` gets one line per change."""

    def __init__(self, limiter: RateLimiter, note: Callable[[str], None]) -> None:
        self.limiter = limiter
        self.note = note
        self.state = Steer()
        self.stopped = threading.Event()
        self.yielded = 0  # times the job slowed down from unlimited
        self.limited_seconds = 0.0
        self._noted = {"down": -NOTE_EVERY, "up": -NOTE_EVERY}
        self._thread = threading.Thread(target=self._run, name="prefetch-yield", daemon=True)

    def sample(self) -> Sample | None:
        cpu = machine_cpu()
        if cpu is None:
            return None
        t = os.times()
        return Sample(time.monotonic(), cpu[0], cpu[1], t.user + t.system, self.limiter.passed)

    def start(self) -> Yielder:
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the thread; a summary line when the job yielded at all."""
        self.stopped.set()
        self._thread.join(2.0)
        if self.yielded:
            self.note(f"yielded to other processes {self.yielded} time{'s' if self.yielded != 1 else ''}, "
                      f"{self.limited_seconds:.0f}s slowed in all")

    def _run(self) -> None:
        before = self.sample()
        while before is not None and not self.stopped.wait(PERIOD):
            now = self.sample()
            if now is None:
                return
            was = self.state.limit
            limit = step(self.state, before, now)
            if was is not None:
                self.limited_seconds += now.wall - before.wall
            before = now
            if limit != was:
                self.limiter.set_rate(limit)
                self._tell(was, limit, now.wall)

    def _tell(self, was: float | None, limit: float | None, at: float) -> None:
        if was is None and limit is not None:
            self.yielded += 1
            if at - self._noted["down"] >= NOTE_EVERY:
                self._noted["down"] = at
                self.note(f"other processes need the CPU ({self.state.idle:.1f} idle, others use "
                          f"{self.state.others:.1f}): yielding (at most {limit / 1e6:.0f} MB/s for now; "
                          "--no-nice turns this off)")
        elif limit is None and at - self._noted["up"] >= NOTE_EVERY:
            self._noted["up"] = at
            self.note("CPU free again: full speed")


def start_yielding(note: Callable[[str], None]) -> Yielder | None:
    """A running ``Yielder`` over a new open limiter; None where ``/proc/stat`` cannot be read."""
    if machine_cpu() is None:
        return None
    return Yielder(RateLimiter(None), note).start()
