"""What every transfer to one host shares: the connection budget, the warm connections, the route.

A run that fetches many files (a URL list, a repo of hundreds of files) gives all its
transfers one :class:`Hosts`. Per host (``scheme://host:port`` of a transfer's first URL)
a :class:`Host` keeps:

* **a connection budget** (``host_connections``, 32 by default: what one file may open
  on its own, so one big file loses nothing): a transfer starts a worker only when
  :meth:`Host.try_lease` grants a slot, and a worker's client sends only when
  :meth:`Host.admit` finds room, so the files in flight together never hold more
  connections than that; a 429 or 503 from the host lowers the cap (:meth:`Host.refused`;
  a storm's notes are one a second at most, saying the latest cap),
  and the refused request waits for its turn to try again; after a while without a
  refusal the cap goes up again, sooner and by more while raises hold (:meth:`Host.relax`,
  ``engine/recovery.py``);
* **a fair share** of it per transfer (:meth:`Host.share`): many small files get one
  connection each, a lone big file gets all of them;
* **warm connections**: a worker's HTTP client goes back to the host's idle list when the
  worker ends, and the next worker (of any file) takes it, so its keep-alive connection
  passes from file to file instead of a new TCP and TLS handshake per file;
* **the route judgement** (:class:`SharedRouteJudge`): the first answers from the host
  say whether the route is long; later files start with the verdict;
* with ``slots_dir``, **the cap shared with the user's other processes**
  (``engine/shared_budget.py``): each connection the host's files may have open, running or
  warm, holds one of the host's slots on this machine.

No lock here is held while waiting on the network. A transfer without a ``Host`` (one
``download_to_part`` call on its own) behaves as before.
"""

from __future__ import annotations

import os
import threading
import time
from urllib.parse import urlsplit

from prefetch.model.events import Event, EventKind, EventSink, ignore_event
from prefetch.engine.idle_slots import watch_due, watch_idle
from prefetch.engine.pooled import PooledClient
from prefetch.engine.recovery import CapRecovery
from prefetch.engine.near import SharedRouteJudge

DEFAULT_HOST_CONNECTIONS = 32  # TransferOptions.host_connections: what one big file may open on its own
NOTE_EVERY = 1.0  # seconds: a storm of refusals says its lowered cap at most this often (the latest cap)
SHORT_ROUTE_FILES = max(8, 2 * (os.cpu_count() or 1))  # at most this many files in flight on a short route (Hosts.files_now)
BUSY = 0.9  # CPU seconds a second the files in flight on a short route are kept at (Hosts.files_now)


_HOST_KEYS: dict[tuple[str, str], str] = {}  # (scheme, netloc) -> its host_key: a list's URLs share a few


def host_key(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the port spelled out), lower-cased."""
    parts = urlsplit(url)
    known = _HOST_KEYS.get((parts.scheme, parts.netloc))
    if known is not None:
        return known
    scheme = (parts.scheme or "http").lower()
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        port = 0
    key = f"{scheme}://{(parts.hostname or '').lower()}:{port}"
    if len(_HOST_KEYS) >= 256:
        _HOST_KEYS.clear()
    _HOST_KEYS[parts.scheme, parts.netloc] = key
    return key


class Host:
    """One host's shared state (see the module docstring); every method is thread-safe."""

    def __init__(self, key: str, *, budget: int, long_route: float, client_factory=None,
                 on_event: EventSink = ignore_event, stop: threading.Event | None = None, shared=None) -> None:
        self.key = key
        self.shared = shared  # engine.shared_budget.SharedSlots: the cap shared by the user's processes (None: not)
        self.slot_refused_at = -1.0  # when a lease last found every shared slot taken (monotonic)
        self.budget = max(1, budget)
        self.cap = self.budget  # the budget, or less once the host refused connections
        self.route = SharedRouteJudge(long_route)
        self._factory = client_factory
        self._emit = on_event
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)
        self._stop = stop if stop is not None else threading.Event()
        self.admitted = 0  # connections in use (a request sent, the client not yet given back)
        self.leased = 0  # connections (workers) running now
        self.peak = 0  # most connections at once, over the run
        self.opened = 0  # HTTP clients created: each opens its own connection
        self.transfers = 0  # transfers to this host running now
        self.lent = 0  # clients lent to workers now
        self.refusals = 0
        self.recovery = CapRecovery()  # when a lowered cap is tried higher again
        # The notes of a storm of refusals: one a NOTE_EVERY seconds, saying the latest cap.
        self._noted_at = -NOTE_EVERY  # when the last "at most N" note was said (monotonic)
        self._unsaid: tuple[int, int] | None = None  # (refusals not said yet, last status) since
        # A file to this host gave up (its retries in a row, or its --timeout, without a byte) and no
        # file from it was complete since: the next files give up at their first failure
        # (engine/retry.py), so a host that is down costs a list one request a file, not retries each.
        self.given_up = False
        # The bulk lane (engine/bulk.py) may pipeline this host's small files; False once it met
        # trouble there (out of step, a close or stall, a 429 or 5xx): the usual path for the rest of the run.
        self.bulk = True
        self._idle: dict = {}  # client factory -> warm clients
        self.warm = 0  # clients in _idle
        self.watching = False  # a thread looks whether another process waits for this idle host's slots

    # -- transfers and their share --------------------------------------------------
    def join(self) -> None:
        with self._lock:
            self.transfers += 1

    def leave(self) -> None:
        with self._lock:
            self.transfers = max(0, self.transfers - 1)
            watch = watch_due(self)
        if watch:
            watch_idle(self)

    def share(self) -> int:
        """Connections one transfer may run now: the cap split evenly between the running transfers."""
        with self._lock:
            return max(1, self._cap_now() // max(1, self.transfers))

    def _cap_now(self) -> int:
        """The cap, or fewer while another process waits for its first connection (lock held)."""
        limit = None if self.shared is None else self.shared.limit
        return self.cap if limit is None else max(1, min(self.cap, limit))

    def _fit_shared(self) -> None:
        """Shared slots beyond the connections this process may have open go back (lock held)."""
        if self.shared is not None:
            self.shared.shrink(max(self.leased, self.lent + self.warm))

    # -- connection slots ------------------------------------------------------------
    def try_lease(self) -> bool:
        """Take a connection slot if the cap allows one more now (never waits)."""
        with self._lock:
            if self.leased >= self._cap_now():
                return False
            if self.shared is not None:
                now = time.monotonic()
                self.shared.look(now)  # (every LOOK seconds: does another process wait for its first?)
                if not self.shared.grow(max(self.leased + 1, self.lent + self.warm), now):
                    self.slot_refused_at = now  # (every slot on this machine is taken: wait_for_slot)
                    return False
            self.leased += 1
            self.peak = max(self.peak, self.leased)
            return True

    def first_wait(self, now: float) -> float:
        """Seconds this process has waited for its first connection (others hold every slot)."""
        return now - self.shared.waiting_since if self.shared is not None and self.shared.waiting else 0.0

    def release(self) -> None:
        """A worker that held a slot has ended."""
        with self._lock:
            self.leased = max(0, self.leased - 1)
            self._fit_shared()
            self._turn.notify_all()  # (a lane waiting for a slot: wait_for_slot)

    def wait_for_slot(self, seconds: float) -> bool:
        """Wait until a connection could be leased and admitted now (True), at most ``seconds``:
        the bulk lane, when another download holds every slot, sleeps here instead of asking
        again at once. Woken by a slot given back or the cap changing; the run's stop ends it."""
        until = time.monotonic() + seconds
        with self._turn:
            while (self.leased >= self._cap_now() or self.admitted >= self.cap
                   or time.monotonic() - self.slot_refused_at < 0.1):  # (another process holds the slots)
                left = until - time.monotonic()
                if left <= 0 or self._stop.is_set():
                    return False
                self._turn.wait(min(left, 0.1))  # (the stop is an Event: looked at every 0.1 s, as admit does)
            return True

    def admit(self) -> None:
        """Wait until one more connection fits the cap (a worker that outlived a lowered cap
        waits here before its next request); the run's stop lets it through at once."""
        with self._turn:
            while self.admitted >= self.cap and not self._stop.is_set():
                self._turn.wait(0.1)
            self.admitted += 1

    def try_admit(self) -> bool:
        """:meth:`admit` if one more connection fits the cap now (never waits)."""
        with self._turn:
            if self.admitted >= self.cap:
                return False
            self.admitted += 1
            return True

    def dismiss(self) -> None:
        """A connection admitted by :meth:`admit` is no longer in use."""
        with self._turn:
            self.admitted = max(0, self.admitted - 1)
            self._turn.notify()

    def refused(self, status: int) -> None:
        """The host answered 429/503 while serving other connections of ours: at most those, from now on.

        A refusal with nothing else open is the server's load, not a connection cap: the
        transfer's own retry (and Retry-After) deals with it and the cap stays.
        """
        with self._turn:
            self.refusals += 1
            self.admitted = max(0, self.admitted - 1)  # the refused request gives its place up
            lower = min(self.cap, self.admitted)
            lowered = 0 < lower < self.cap
            if lowered:
                self.cap = lower
                now = time.monotonic()
                self.recovery.lowered(now)
                # Warm connections beyond the new cap are closed as they come back (give_back).
                unsaid = (self._unsaid[0] if self._unsaid else 0) + 1, status
                note = self._take_note(now, unsaid)
            self._turn.notify()
        if lowered and note:
            self._emit(note)

    def _take_note(self, now: float, unsaid: tuple[int, int] | None) -> Event | None:
        """The "at most N" note of the refusals ``unsaid`` (count, last status) if one is due now
        (NOTE_EVERY seconds after the last), saying the cap as it is now; else they wait for the
        next refusal, :meth:`relax` or :meth:`close` (called with the lock held)."""
        if unsaid is None or now - self._noted_at < NOTE_EVERY:
            self._unsaid = unsaid
            return None
        self._noted_at, self._unsaid = now, None
        count, status = unsaid
        what = "a connection" if count == 1 else f"{count} connections"
        return Event(EventKind.NOTE, self.key, message=f"{self.key} refused {what} (HTTP {status}); "
                     f"at most {self.cap} connection{'s' if self.cap != 1 else ''} to it from now on")

    def relax(self, now: float, after: float) -> None:
        """A higher lowered cap once ``after`` seconds passed without a refusal (0: never;
        sooner and by more after raises that held: ``engine/recovery.py``): a passing storm of
        503s does not hold the host's files to a low count for the rest of the run; a real cap
        refuses the extra connection and comes back."""
        if self.shared is not None and now >= self.shared.next_look:
            with self._lock:
                self.shared.look(now)  # (every LOOK seconds: does another process wait for a slot?)
        if self.cap >= self.budget and self._unsaid is None:
            return  # (the usual case, read without the lock: every transfer's loop asks)
        with self._turn:
            note = self._take_note(now, self._unsaid)  # a storm's last cap, once its second is over
            quiet = now - self.recovery.since
            raised = self.recovery.due(now, after, self.cap, self.budget)
            if raised is not None:
                self.cap = raised
                self._turn.notify_all()
        if note is not None:
            self._emit(note)
        if raised is not None:
            self._emit(Event(EventKind.NOTE, self.key, message=f"{self.key}: no refusal for {quiet:.3g}s; "
                             f"trying {raised} connections to it"))

    # -- warm clients ----------------------------------------------------------------
    def lender(self, factory=None):
        """A ``client_factory`` for the engine that lends this host's warm clients made by ``factory``.

        Clients of different factories (a Hub client that adds a token) are never mixed.
        """
        def lend(*, timeouts=None, resolve=None) -> PooledClient:
            return self.client(timeouts=timeouts, resolve=resolve, factory=factory)
        return lend

    def client(self, *, timeouts=None, resolve=None, factory=None) -> PooledClient:
        """A client for one worker: a warm one (its connection still open) if any, else a new one."""
        key = factory or self._factory
        with self._lock:
            idle = self._idle.get(key)
            client = idle.pop() if idle else None
            if client is None:
                self.opened += 1
            else:
                self.warm -= 1
            self.lent += 1
        if client is None:
            make = key
            if make is None:
                from prefetch.net.http import Client as make
            client = make(timeouts=timeouts, resolve=resolve)
        elif timeouts is not None:
            client.timeouts = timeouts
        return PooledClient(self, client, key)

    def give_back(self, client, key=None) -> None:
        """A worker is done with ``client``: keep it warm for the next, within the cap."""
        with self._lock:
            # Clients in all (warm + lent, this one included) stay within the cap: each is a connection.
            keep = self.warm + self.lent <= self._cap_now()
            self.lent -= 1
            if keep:
                self._idle.setdefault(key, []).append(client)
                self.warm += 1
            watch = keep and watch_due(self)
        if watch:
            watch_idle(self)  # (the bulk lane's clients come back with no transfer running)
        if not keep:
            client.close()
            if self.shared is not None:
                with self._lock:
                    self._fit_shared()  # (after the close: its slot never outlives the connection)

    def close(self) -> None:
        """Close the warm connections (the run is over); a storm's note not said yet is said."""
        with self._lock:
            idle, self._idle = self._idle, {}
            self.warm = 0
            note = self._take_note(self._noted_at + NOTE_EVERY, self._unsaid)
        for clients in idle.values():
            for client in clients:
                client.close()
        if self.shared is not None:
            with self._lock:
                self.shared.close()  # (its slots go with the file; a late worker's release finds it closed)
        if note is not None:  # (after the clients: a sink that raises leaves none open)
            self._emit(note)


class Hosts:
    """Every :class:`Host` of one run, made on first use."""

    def __init__(self, *, budget: int = DEFAULT_HOST_CONNECTIONS, long_route: float = 0.04,
                 client_factory=None, on_event: EventSink = ignore_event, stop: threading.Event | None = None,
                 slots_dir: str | None = None) -> None:
        self.stop = stop
        self.slots_dir = slots_dir  # the hosts' slot files, shared with the user's other processes (None: none)
        self.budget = budget
        self.long_route = long_route
        self.client_factory = client_factory
        self.on_event = on_event
        self._lock = threading.Lock()
        self._hosts: dict[str, Host] = {}

    def host_for(self, url: str) -> Host:
        key = host_key(url)
        with self._lock:
            host = self._hosts.get(key)
            if host is None:
                host = self._hosts[key] = Host(key, budget=self.budget, long_route=self.long_route,
                                               client_factory=self.client_factory, on_event=self.on_event,
                                               stop=self.stop, shared=self._shared(key))
            return host

    def _shared(self, key: str):
        if self.slots_dir is None:
            return None
        from prefetch.engine.shared_budget import open_shared

        return open_shared(self.slots_dir, key, self.budget)

    def all(self) -> list[Host]:
        with self._lock:
            return list(self._hosts.values())

    def files_now(self, workers: int, busy: tuple[float, float] | None = None) -> int:
        """How many files may be in flight now, of ``workers`` at most.

        All of them until a host has answered, and on a long route: there files overlap
        their round trips. Once every host of the run has answered quicker than a long
        route can (loopback, a LAN: :attr:`SharedRouteJudge.near`) small files may keep the
        interpreter busy rather than wait, and then each file more in flight only adds
        hand-offs of the interpreter lock between file threads: from loopback nginx, 2,000
        files of 16 KiB took 1.6x the time with 8 files in flight as with one (CPU 5.5 s
        against 2.9 s). With ``busy``, ``(cpu, files)`` of the recent files
        (:class:`prefetch.engine.many.Busy`: the CPU seconds a second they took on their
        threads, with ``files`` in flight), the count is scaled to keep them at ``BUSY`` (0.9
        CPU seconds a second), rounded down, at least one and never more than
        ``SHORT_ROUTE_FILES``: one file on loopback (already at ~0.8-1.0), 4-8 through a 2-5 ms
        route, all 8 from a server that sends a body 40 ms after its head.
        """
        hosts = self.all()
        if not hosts or not all(h.route.near for h in hosts):
            return workers
        few = max(1, min(workers, SHORT_ROUTE_FILES))
        if busy is None or busy[0] <= 0:
            return few
        cpu, files = busy
        return max(1, min(few, int(files * BUSY / cpu)))

    def close(self) -> None:
        for host in self.all():
            host.close()
