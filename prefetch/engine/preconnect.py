"""Connections opened while the probe's answer is on its way, on a long route.

A file's first request (the probe) learns its size; only then can the other connections
ask for ranges, and on a long route each new connection first costs a round trip of
handshake (one or two more with TLS). When the probe's answer is slow in coming,
:class:`Preconnects` opens the connections the answer will call for now: TCP and TLS only,
no request (``Client.connect``), each on the thread that will run it as a worker. In two
steps: after ``long_route`` seconds without it (the answer will be judged at least "long?",
and after any such answer the ramp opens ``initial_connections``), that many; after
``2 x long_route`` (the route judge will call the route long, and the ramp will open the
long-route count at once) the rest of the long-route count. A mirror 30 ms away answers the
probe in ~62 ms: its other connections, opened at ~43 ms, carried their first bytes ~37 ms
after the probe's, against ~66 ms when they were opened after its answer.
Once the size is known the transfer's main loop hands each a worker id
(:meth:`Preconnects.start`) instead of starting a new thread, and its range request goes
out at once on the open connection: the handshake overlapped the probe's wait.

Kept polite:

* only as many as the transfer would run after that answer (``--connections``, else the
  ramp's first count, then the long-route count), within the host's budget: each holds
  one of the host's connection slots from the moment it opens, as a worker does;
* none when a size hint says the file fits the probe's answer, and no more than the
  pieces the rest needs; at most ``preconnect`` (``PREFETCH_PRECONNECT``; 0: never);
* none through a proxy (``Client.connect`` declines), none to a host known to be near or
  that refused a request (429/503), and those open go back when it refuses one (a lowered cap
  counts them: the probe's retry would wait for their slots while they wait for its answer);
* the ones the answer does not call for go back at once: to the host's warm clients
  (the next file's) or closed; so do all of them when the answer came from another host
  (a redirect, to a CDN: the workers open their own there);
* a stop never waits for one: a parked thread ends as soon as it is told, one still
  connecting has its connect cut short (``net.open_socket.abort_head``), and each gives its
  slot in the host's budget back as it ends.
"""

from __future__ import annotations

import threading

from prefetch.engine.fetcher import Fetcher
from prefetch.engine.hosts import host_key

# Seconds past the deadline that none of them ran nor waited to run: blocked, not waited for. (Not
# less: a thread waiting for the interpreter's lock sleeps on it, and in a process a loaded machine
# runs a few ms in a hundred, half a second can pass without one of them getting it.)
_BLOCKED = 2.0
_SETTLE_LIMIT = 30.0  # seconds past the deadline that ``settle`` waits at most, however busy the machine


class _Parked:
    """One connection opened ahead, on its own thread: a worker once it is given an id."""

    def __init__(self, owner: "Preconnects", url: str) -> None:
        self.owner = owner
        self.url = url
        self.worker: int | None = None
        self.go = threading.Event()
        self.thread = threading.Thread(target=self._run, name="prefetch-preconnect", daemon=True)

    def _run(self) -> None:
        t = self.owner.t
        client = None
        try:
            client = t.client_factory(timeouts=t.opt.timeouts, resolve=t.opt.resolve)
            if not self.go.is_set():  # (told to go back before it began: no connect)
                client.connect(self.url)
        except Exception:  # noqa: BLE001 - the worker's own request meets it again and reports it
            pass
        self.go.wait()
        if self.worker is None:  # not needed after all, or the transfer is over
            if client is not None:
                client.close()  # (a host's client goes back to its warm ones)
            if t.host is not None:
                t.host.release()
            return
        Fetcher(t).run(self.worker, client=client)  # (None: it makes its own; its end gives the slot back)


class Preconnects:
    """The connections a transfer opened ahead of its probe's answer (used by its main loop only)."""

    def __init__(self, t) -> None:
        self.t = t
        self._parked: list[_Parked] = []
        self._opened = 0  # connections opened ahead so far (both steps)
        self._steps = 0  # steps taken: 1 after long_route, 2 (the last) after 2 x long_route
        self._refusals = 0  # the host's refusals when they opened
        self._closed: list[_Parked] = []  # sent back, their threads maybe still ending (``settle``)

    def due(self, now: float, asked_at: float | None) -> float | None:
        """Seconds until the next step is due (None: none is coming): the main loop's wait."""
        if self._steps >= 2 or asked_at is None or self.t.size is not None:
            return None
        return max(0.0, asked_at + self.t.opt.long_route * (self._steps + 1) - now)

    def maybe_open(self, now: float, asked_at: float | None) -> None:
        """Open them when the probe has waited ``long_route`` for its answer (the ramp's first
        count), then ``2 x long_route`` (the long-route count): each step once a transfer."""
        t = self.t
        if self._parked and t.host is not None and t.host.refusals > self._refusals:
            # The host refused a request (429/503) since they opened: the cap it lowers counts them,
            # and the probe's retry would wait for their slots while they wait for its answer (a
            # single file from a server answering 429 hung for good). They go back now, none again.
            self._steps = 2
            self.close()
            return
        if self._steps >= 2 or asked_at is None or now - asked_at < t.opt.long_route * (self._steps + 1):
            return
        long = now - asked_at >= 2 * t.opt.long_route
        self._steps = 2 if long else 1
        if t.host is not None and t.host.refusals:
            self._steps = 2
            return  # the host refuses requests: the wait is the server's (and the slots the probe's)
        if not self._parked:
            self._refusals = t.host.refusals if t.host is not None else 0
        if t.size is not None or t.answered or t.stop.is_set() or t.sources.pinned is not None:
            self._steps = 2
            return
        if t.host is not None and t.host.route.near:
            self._steps = 2
            return  # the host answered quickly before: the wait is the server's, not the route's
        if len({host_key(u) for u in t.urls}) != 1:
            self._steps = 2
            return  # several hosts: which one a worker will ask is not known yet
        for _ in range(self.count(long=long) - self._opened):
            if t.host is not None and not t.host.try_lease():
                break  # the host's connections are all in use
            parked = _Parked(self, t.urls[0])
            self._parked.append(parked)
            self._opened += 1
            parked.thread.start()

    def count(self, *, long: bool = True) -> int:
        """How many to open in all: what the transfer would add to its probe after an answer
        that slow (``long``: a long route's count; else the ramp's first count)."""
        t, opt = self.t, self.t.opt
        first = opt.long_route_connections if long else opt.initial_connections
        n = opt.connections if opt.connections is not None else min(first, opt.max_connections)
        if t.host is not None:
            n = min(n, t.host.share())
        n = min(n - 1, opt.preconnect)
        hint = t.size_hint
        if hint is not None:
            rest = hint - opt.first_request  # what the probe's answer leaves, in pieces
            n = min(n, 0 if rest <= 0 else -(-rest // max(1, opt.piece_size)))
        return max(0, n)

    def fit(self) -> None:
        """The probe's answer is in: if it came from another host (a redirect), the connections
        opened ahead are to the wrong one: they go back now, and the workers open their own."""
        src = self.t.worker_source.get(0) or self.t.sources.all[0]  # (worker 0: the probe)
        if self._parked and host_key(src.effective_url or src.url) != host_key(self._parked[0].url):
            self.close()

    def start(self, worker: int) -> threading.Thread | None:
        """A parked connection becomes worker ``worker`` (its thread, already running), or None."""
        if not self._parked:
            return None
        parked = self._parked.pop(0)
        parked.worker = worker
        parked.go.set()
        return parked.thread

    @property
    def waiting(self) -> int:
        return len(self._parked)

    def close(self) -> None:
        """The ones not needed go back; a connect still in progress is cut short (``abort_head``)."""
        parked, self._parked = self._parked, []
        if not parked:
            return
        from prefetch.net.open_socket import abort_head

        self._closed = [p for p in self._closed if p.thread.is_alive()] + parked
        for p in parked:
            p.go.set()
            if p.thread.ident is not None:
                abort_head(p.thread.ident)  # (nothing when it is connected and waiting on ``go``)

    def settle(self, deadline: float) -> None:
        """Wait for the threads of the ones sent back to end, cutting again a connect or handshake
        one began after ``close``: the transfer's end. A file's call must not return while threads
        of its own are still inside OpenSSL (a handshake, the CA bundle loading, with the
        interpreter's lock let go): a script that then ends has the interpreter's finalisation
        free what they use under them.

        Until ``deadline`` (a ``time.monotonic()``), and past it while any of them still runs or
        waits, runnable, for a CPU (``fs.processes.busy_seconds``): on a loaded machine the work
        they have left (a refused handshake, the bundle's build) takes a CPU they wait for, and
        they end once they get it. Not for ones blocked, all of them, ``_BLOCKED`` seconds past
        the deadline (a DNS lookup, which no stop cuts), nor ever ``_SETTLE_LIMIT`` past it."""
        import time

        from prefetch.fs.processes import busy_seconds
        from prefetch.net.open_socket import abort_head

        self.close()
        seen, moved = None, deadline  # their busy seconds at the last look past the deadline, and when they moved
        while True:
            alive = [p for p in self._closed if p.thread.is_alive()]
            now = time.monotonic()
            if not alive or now >= deadline + _SETTLE_LIMIT:
                break
            if now >= deadline:
                busy = busy_seconds([p.thread.native_id for p in alive])
                if busy != seen:
                    seen, moved = busy, now
                elif now - moved >= _BLOCKED:
                    break
            for p in alive:
                abort_head(p.thread.ident)  # (one waiting on the bundle's build connects after it)
            alive[0].thread.join(0.05)
        self._closed = [p for p in self._closed if p.thread.is_alive()]
