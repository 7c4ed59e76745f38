"""Is a host near? The route judge the transfers of one host share (:class:`SharedRouteJudge`).

A host is near (its small files run in one answer, ``engine/single.py``; a list's go through the
bulk lane, ``engine/bulk.py``; few files are in flight, ``Hosts.files_now``) once an answer came
back under the long-route mark, or the kernel's round trip on a connection is under it and the
late answers were the machine's, not the route's (see the class).
"""

from __future__ import annotations

import threading
import time

from prefetch.fs.processes import CpuContention
from prefetch.engine.schedule import RouteJudge


class SharedRouteJudge(RouteJudge):
    """A :class:`RouteJudge` that the transfers of one host feed together (thread-safe).

    A late answer (over the long-route mark) on a connection whose kernel round trip is short is
    either the machine's or the route's. The machine's: a loaded machine kept the server or this
    process waiting for a CPU, and the route is as short as the kernel says. The route's: a relay
    or tunnel one hop away (an ``ssh -L`` port, a CDN edge fetching from far, the bench's latency
    proxy), whose kernel round trip is the next hop's while every answer takes the far route's
    time, contended CPUs or not. The requesting thread's own wait for a CPU over the request
    (``waited``, already left out of ``latency``) tells them apart: a late answer is the
    machine's when the CPUs were contended and what is left of it is within ``SLACK`` times that
    wait of the mark (a near server at the thread's priority waits about as long; a process kept
    that short of a CPU is better served by the near host's ways, which spare it, whatever the
    route); any other late one is the route's: beside a training loop on every core, a nice-0
    thread waited 0.1-25 ms of a 200 ms relay's 400 ms first answers. The host is near by the
    kernel's round trip while the machine's late answers outnumber the route's (one odd answer
    does not decide); an answer whose wait was not measured (after the host's first answers,
    or without schedstat) is not weighed.
    """

    SLACK = 4  # a late answer within the mark plus this many times its thread's wait for a CPU: the machine's
    LOOK_EVERY = 0.25  # seconds: the CPUs' pressure is read again at most this often (a /proc read a look)

    def __init__(self, threshold: float, contended=None) -> None:
        super().__init__(threshold)
        self._lock = threading.Lock()
        # Were the CPUs contended lately (since the host's first request, or the last few seconds)?
        # (``fs.processes.CpuContention().lately``; a test may give its own)
        self._contended = contended or CpuContention().lately
        self.late = [0, 0]  # late answers with a short kernel round trip: (the machine's, the route's)
        self._looked = (float("-inf"), False)  # (when the CPUs were last looked at, monotonic; contended)

    def add(self, latency: float, rtt: float | None = None, waited: float | None = None) -> str | None:
        with self._lock:
            if rtt is not None and latency >= self.threshold:
                if waited is None:
                    rtt = None  # (not weighed)
                else:
                    machine = (latency < self.threshold + self.SLACK * waited
                               and self._contended_lately())  # (a look only for an answer the wait explains)
                    self.late[0 if machine else 1] += 1
                    if not machine:
                        rtt = None  # (its kernel round trip is the next hop's, not the route's)
            return super().add(latency, rtt)  # (and the quickest answer yet: ``fastest``, the route's round trip)

    def _contended_lately(self) -> bool:
        """``contended()``, looked at again at most every ``LOOK_EVERY`` seconds: a loaded machine's
        thousands of late loopback answers take a few reads of /proc, not one each."""
        now = time.monotonic()
        if now - self._looked[0] >= self.LOOK_EVERY:
            self._looked = (now, self._contended())
        return self._looked[1]

    @property
    def near(self) -> bool:
        """An answer came back quicker than a long route can answer, or the kernel's round trip is
        that short and a loaded machine, not the route, made the late answers late (the load
        stretches every answer, not the kernel's round trip): the route is short, whatever the
        first answers said."""
        return ((self.fastest is not None and self.fastest < self.threshold)
                or (self.kernel_rtt is not None and self.kernel_rtt < self.threshold and self.late[0] > self.late[1]))
