"""HTTP transfer into ``<final>.part``: the flow of one download, top to bottom.

One file, one or more sources (the origin and flat mirrors). :func:`download_to_part`
opens the ``.part`` and its resume record (``resume_state``), then runs
*generations*: a generation plans the missing byte ranges (``schedule``), starts
worker threads (a probe first, then as many as the ramp or ``--connections`` says)
and ends when the file is complete, on a fatal error, on a stop, or when the
remote changed (then the next generation starts over from byte 0).

A worker loops: take a segment (or split the largest one), pick a source
(``sources``), send one ranged request with ``If-Range``, check the answer
(``response_check``), stream the body into the file (``stream``); on trouble it
asks ``retry`` whether to back off, step back or give up. The hash of the file's
contiguous prefix is computed alongside (``stream.PrefixHasher``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable

from prefetch.errors import InterruptedTransferError, RemoteChangedError
from prefetch.model.events import Event, EventKind, EventSink, ignore_event
from prefetch.engine.fetcher import Fetcher
from prefetch.fs.files import mib
from prefetch.fs.processes import cpu_and_wait
from prefetch.fs.safefs import as_path
from prefetch.engine.ranges import RangeSet
from prefetch.engine.part_file import PartFile
from prefetch.engine.resume_state import StateSaver
from prefetch.engine.retry import RetryPolicy
from prefetch.engine.ramp import Ramp, RateMeter
from prefetch.engine.schedule import RouteJudge, Schedule
from prefetch.engine.sources import Restart, Source, Sources
from prefetch.engine.stream import PrefixHasher
from prefetch.engine.options import TransferOptions, TransferResult  # noqa: F401 - importable from here
from prefetch.engine.demotion import SourceHandling
from prefetch.engine.part_state import PartAndState
from prefetch.engine.worker_calls import WorkerCalls
from prefetch.engine.preconnect import Preconnects
from prefetch.engine import single

_STOP_GRACE = 0.8  # seconds a stop waits for workers before returning (they cannot write after)
_HASH_THREAD_AFTER = 4 << 20  # bytes of contiguous prefix before the hash follows in its own thread
_RATE_STEP = 0.05  # seconds between looks at the sources' rates (cheap: a few sources)
_STRAGGLER = 1.0  # seconds: a connection this far from the end of its answer may have it split
SAY_WAIT = 1.0  # seconds a wait for the first connection (other processes hold the slots) goes unsaid


def download_to_part(
    *,
    urls: list[str],
    part: Path,
    state_file: Path,
    algorithm: str | None = None,
    options: TransferOptions | None = None,
    on_event: EventSink = ignore_event,
    stop: threading.Event | None = None,
    client_factory: Callable | None = None,
    name: str | None = None,
    size_hint: int | None = None,
    fresh: bool | None = None,
    first=None,
) -> TransferResult:
    """Download ``urls`` (sources of the same file) into ``part``, resuming from ``state_file``.

    Args:
        urls: the origin and/or mirrors of one file, preferred first.
        algorithm: hash to compute while downloading ("sha256", "md5") or None.
        stop: set it to stop cleanly (within about a second); the state is saved and
            InterruptedTransferError raised.
        client_factory: ``factory(timeouts=...)`` -> a ``prefetch.net.http.Client`` per worker.
        size_hint: the file's size as a listing or registry states it (None: unknown); only
            bounds how many connections open ahead of the first answer (``preconnect.py``).
        fresh: True when the caller, holding the file's lock, just found neither ``part`` nor
            ``state_file`` (None: not known; the engine looks when it needs to).
        first: the ``single.Handover`` of this download's first request, asked already on a slot
            of ``urls[0]``'s host (``flow/served_names.py``): the transfer reads on from it.
    Returns:
        TransferResult with the digest of the complete ``part``.
    Raises:
        NetworkError, RemoteChangedError, LocalFileError, DiskFullError,
        InterruptedTransferError.
    """
    options = options or TransferOptions()
    host = options.hosts.host_for(urls[0]) if options.hosts is not None and urls else None
    part, state_file = as_path(part), as_path(state_file)
    stop = stop or threading.Event()
    name = name or part.name.removesuffix(".part")
    if host is not None:
        host.join()  # the host's share of connections counts this file from now on
    handover = transfer = None
    try:
        if first is not None:
            handover = first  # (given back below when no transfer takes it over)
        elif single.applies(host, urls, part, state_file, options, stop, fresh=fresh):
            # A small file from a near host: one answer, without the transfer (engine/single.py).
            handover = single.try_single(host=host, url=urls[0], part=part, state_file=state_file,
                                         algorithm=algorithm, options=options, on_event=on_event, stop=stop,
                                         client_factory=client_factory, name=name)
            if isinstance(handover, TransferResult):
                host.given_up = False  # the host delivers a file: its files get their retries again
                return handover
        if host is not None:
            client_factory = host.lender(client_factory)  # warm connections pass from file to file (engine/hosts.py)
        elif client_factory is None:
            from prefetch.net.http import Client as client_factory
        transfer = _Transfer(host=host, urls=urls, part=part, state_file=state_file, algorithm=algorithm,
                             options=options, on_event=on_event, stop=stop, client_factory=client_factory,
                             name=name, size_hint=size_hint)
        transfer.first_answer = handover  # (what the one-answer attempt leaves: its answer, or its failure)
        result = transfer.run()
        if host is not None:
            host.given_up = False  # the host delivered a file: its files get their retries again
        return result
    except KeyboardInterrupt:
        raise InterruptedTransferError(f"{name}: interrupted; run the same command again to resume") from None
    finally:
        if isinstance(handover, single.Handover) and (transfer is None or transfer.first_answer is handover):
            handover.close()  # never taken over (the transfer failed before its first request): the
            host.release()  # answer, its client and its connection slot must not be left held
        if host is not None:
            host.leave()


class _Transfer(WorkerCalls, SourceHandling, PartAndState):
    """Shared state of one running transfer; workers are threads, ``lock`` guards it all."""

    def __init__(self, *, urls, part, state_file, algorithm, options, on_event, stop, client_factory, name,
                 host=None, size_hint=None):
        self.urls = list(urls)
        self.host = host  # prefetch.engine.hosts.Host: the connection budget and route shared with other files
        self.said_wait = False  # the wait for a first connection was said (a NOTE: "waiting for ...")
        self.part = part
        self.state_file = state_file
        self.algorithm = algorithm
        self.opt: TransferOptions = options
        self.emit: EventSink = on_event
        self.stop = stop
        self.client_factory = client_factory
        self.name = name
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.sources = Sources(self.urls)
        self.schedule = Schedule(options.min_split)
        # (one source: its host's files share the verdict that it stopped answering, RetryPolicy.delay)
        self.retries = RetryPolicy(options, host if len(self.urls) == 1 else None)
        self.hash = PrefixHasher(algorithm, part)
        self.size: int | None = None
        self.ranges_ok = True
        self.done = RangeSet()
        self.file = PartFile(part)
        self.closing = False  # the transfer is over: no more writes (the last worker closes the fd)
        self.fatal: BaseException | None = None
        self.restart: Restart | None = None
        self.plain_restarts = 0  # starts from 0 after a broken answer of a server that ignores Range
        self.downloaded = 0
        self.reused = 0
        self.restarts = 0
        self.max_workers_seen = 0
        self.active_workers = 0
        self.generation = 0
        self.dirty = False
        self.saver = StateSaver(state_file, part, sync=options.sync_data, on_error=self._fail)
        self.interrupt = threading.Event()  # wakes sleeping workers when a generation ends
        self.responses: dict[int, object] = {}  # worker -> open response, to abort on stop
        self.answered: set[int] = set()  # running workers that have had an answer (the ramp waits for them)
        self.pausing = 0  # running workers waiting out a refusal or a retry's delay, no request out (ahead.py)
        # id(Ahead) -> bytes an answer read after its connection's next request went out: not saved
        # as done until that request's answer begins in step (engine/ahead.py; a kill then refetches them)
        self.unconfirmed: dict[int, tuple[int, int]] = {}
        self.worker_limit: int | None = None  # workers beyond this exit (the server asked for fewer)
        self.planned_workers: int | None = None  # the most connections the ramp may run soon (None: max_connections)
        self.latency: float | None = None  # seconds from a request to its answer (moving average)
        self.route = host.route if host is not None else RouteJudge(options.long_route)  # learned once per host
        self.conn_rate = 0.0  # bytes/s per running connection, lately
        self.worker_source: dict[int, Source] = {}  # the source each worker's last request went to
        self.size_hint = size_hint
        self.probe_asked: float | None = None  # when the first request of unknown size went out (monotonic)
        self.ahead = Preconnects(self)  # connections opened while that answer is on its way

    # -- the main loop -----------------------------------------------------
    def run(self) -> TransferResult:
        started = time.monotonic()
        self.open()
        self.emit(Event(EventKind.START, self.name, done=self.done.total(), total=self.size))
        self._hasher: threading.Thread | None = None  # started once the prefix is worth a thread (none for a small file)
        self._hasher_stop: threading.Event | None = None
        try:
            while True:
                self.schedule.plan(self.size, self.done)
                try:
                    self._run_generation(started)
                    break
                except Restart as exc:
                    self._start_over(exc)
            self._trim()  # preallocation or an old .part never leave bytes past the end
            self._catch_up_hash()
        finally:
            if self._hasher is not None:
                self._hasher_stop.set()
                with self.lock:
                    self.wake.notify_all()  # the hash loop sleeps on it: wake it to see the stop
                self._hasher.join()
            self._join_saver()
            with self.lock:
                self.dirty = True
            self._save_state(force=True)
            self._close_part()
        return TransferResult(
            size=self.size or 0,
            digest=self.hash.finish(self.size or 0),
            algorithm=self.algorithm,
            downloaded=self.downloaded,
            reused=self.reused,
            elapsed=time.monotonic() - started,
            connections=self.max_workers_seen,
            restarts=self.restarts,
            sources_dropped=list(self.sources.dropped),
            served={s.url: s.served.total() for s in self.sources.all if s.served.total()},
            part_ident=self.file.ident,
        )

    def _start_over(self, exc: Restart) -> None:
        """The remote changed (or ignores Range): the next generation starts from byte 0."""
        if not exc.ranges and not self.ranges_ok:
            # A server known not to serve ranges (it ignores Range, or its ranges do not fit), whose
            # answer broke or did not fit: the retry could only start from byte 0. A broken
            # connection or server, not a changed file: bounded by --retries, then exit 3.
            self.plain_restarts += 1
            if self.plain_restarts > self.opt.max_attempts:
                from prefetch.errors import NetworkError

                raise NetworkError(
                    f"{self.name}: gave up after {self.plain_restarts} starts from byte 0 (last: {exc}): the "
                    f"server cannot resume this file and its answers broke or did not fit the request. "
                    f"Run the same command again, or use another mirror"
                ) from None
        else:
            self.restarts += 1
        if self.restarts > self.opt.max_restarts:
            raise RemoteChangedError(
                f"{self.name}: the remote file kept changing ({self.restarts} restarts): {exc}. "
                f"Try again later or use another mirror"
            ) from None
        self.note(str(exc))
        self._join_saver()  # a save in flight must not record the old bytes after the truncation
        with self.lock:
            self._truncate()
            self.ranges_ok = exc.ranges
            self.hash.reset()
            self.restart = None
            self.generation += 1

    def _run_generation(self, started: float) -> None:
        threads: list[threading.Thread] = []
        next_id = 0
        fixed = self.opt.connections
        ramp = Ramp(self.opt) if fixed is None else None
        last_state = last_progress = time.monotonic()
        last_rates = 0.0
        rate = RateMeter()
        rate.update(time.monotonic(), self.done.total())
        recent = RateMeter(window=1.0)  # for the per-connection rate that sizes splits
        ended = False  # the generation ran to its end (or restarts): wait for every worker
        try:
            if Fetcher.first_inline(self, started, threads):  # a small file needs no thread (fetcher.py)
                next_id = 1
            while True:
                with self.lock:
                    if self.fatal:
                        raise self.fatal
                    if self.restart:
                        ended = True
                        raise self.restart
                    finished = self._finished_locked()
                    alive, answered = self.active_workers, len(self.answered)
                    sized = self.size is not None  # (one view a pass: the probe's answer sets it meanwhile)
                    one_stream = not (sized and self.ranges_ok) or self.sources.pinned is not None
                if finished:
                    ended = True
                    return
                if self.stop.is_set():
                    raise InterruptedTransferError(
                        f"{self.name}: stopped at {mib(self.done.total())}; run the same command again to resume"
                    )
                now = time.monotonic()
                self.conn_rate = recent.update(now, self.downloaded) / max(1, alive)
                self.schedule.pace(self.conn_rate, self.route.fastest, max(_STRAGGLER, 4 * (self.latency or 0.0)))
                if one_stream:
                    target = 1  # a probe first; no Range support, or one stream: one connection
                elif ramp is None:
                    target = fixed
                else:
                    target = ramp.update(now, self.downloaded, alive=alive, answered=answered, latency=self.latency or 0.0,
                                         route=self.route.route, cpu=time.process_time(),
                                         sched=cpu_and_wait() if ramp.watching else None)
                if self.host is not None:
                    self.host.relax(now, self.opt.cap_retry)  # a cap the host set is tried higher now and then
                    target = min(target, self.host.share())  # the host's budget, split between its files
                if self.size is None and self.opt.preconnect:
                    self.ahead.maybe_open(now, self.probe_asked)  # a long route's handshakes overlap the wait
                with self.lock:
                    quiet = now - self.retries.recovery.since
                    raised = self.retries.relax(now, self.opt.cap_retry, self.opt.max_connections)
                    if self.retries.crowded_at is not None:
                        target = min(target, self.retries.crowded_at)
                        if ramp is not None:
                            ramp.done = True
                    self.worker_limit = target
                    # (once it has judged the route and the size; or it is done: a long route's jump to
                    # its count, or a cap the server set. A cap after a long-route jump left this unset
                    # and requests sized for max_connections: 1 MiB pieces from a capped mirror)
                    if ramp is not None and (ramp.step_started is not None or ramp.done):
                        # its next step at most doubles the count
                        self.planned_workers = target if ramp.done else min(self.opt.max_connections, 2 * target)
                if raised:
                    self.note(f"no refusal for {quiet:.3g}s; trying {raised} connections")
                if self.size is not None and self.ahead.waiting:
                    self.ahead.fit()  # (opened to a host that redirected elsewhere: no use)
                # At most target - alive new workers per pass: a worker that exits at once
                # (restart, fatal error, stop, nothing to split) must not make this spin.
                for _ in range(max(0, target - alive)):
                    if alive and not self._has_work():
                        break
                    parked = self.ahead.waiting > 0  # a connection opened ahead holds its slot already
                    if not parked and self.host is not None and not self.host.try_lease():
                        if not alive and not self.said_wait and self.host.first_wait(now) >= SAY_WAIT:
                            self.said_wait = True  # (`prefetch status` shows the job "waiting")
                            self.note(f"waiting for a connection to {self.host.key}: your other prefetch "
                                      "processes hold all its slots (they make room after a request)")
                        break  # the host's connections are all in use: look again on the next pass
                    if self.host is not None and not next_id:
                        self.retries.progress()  # waiting for a slot is not time without bytes (no worker yet)
                    with self.lock:
                        self.active_workers += 1
                        alive = self.active_workers
                        self.max_workers_seen = max(self.max_workers_seen, alive)
                    if parked:
                        thread = self.ahead.start(next_id)
                    else:
                        thread = threading.Thread(target=Fetcher(self).run, args=(next_id,), daemon=True)
                        thread.start()
                    next_id += 1
                    threads.append(thread)
                if sized and self.ahead.waiting:  # (not the size the answer set after target was 1: the next pass, at once)
                    self.ahead.close()  # opened ahead but not called for: back to the host's warm ones
                if self.algorithm and self._hasher is None and self.done.prefix_end() >= _HASH_THREAD_AFTER:
                    self._start_hasher()  # a small file is hashed at the end instead (no thread)
                if now - last_rates >= _RATE_STEP:
                    self._demote_slow_source(now)
                    last_rates = now
                if now - last_state >= self.opt.state_interval or self._unflushed() >= self.opt.sync_every > 0:
                    self._save_soon()
                    last_state = now
                if now - last_progress >= self.opt.progress_interval:
                    done = self.done.total()
                    self.emit(Event(EventKind.PROGRESS, self.name, done=done, total=self.size,
                                    rate=rate.update(now, done), connections=alive, elapsed=now - started))
                    last_progress = now
                due = self.ahead.due(time.monotonic(), self.probe_asked) if self.opt.preconnect else None
                with self.lock:
                    if not (self.fatal or self.restart or self._finished_locked() or (not sized and self.size is not None)):
                        self.wake.wait(0.05 if due is None else min(0.05, due + 0.001))  # (a step of preconnect.py on time)
        finally:
            self._end_generation(threads, wait=ended)

    def _start_hasher(self) -> None:
        self._hasher_stop = threading.Event()
        self._hasher = threading.Thread(target=self.hash.follow, args=(self._hasher_stop, self.wake, self._prefix_end),
                                        daemon=True)
        self._hasher.start()

    def _end_generation(self, threads: list[threading.Thread], *, wait: bool) -> None:
        """Wake sleeping workers, unblock their reads, and let them go.

        After a restart or the end, every worker is waited for (the next generation
        must not meet a straggler's write). After a stop or an error, a worker still
        connecting or waiting for an answer is given ``_STOP_GRACE`` seconds: it can
        no longer write or record anything, so the stop returns promptly.
        """
        self.ahead.close()
        with self.lock:
            self.generation += 1
            # No worker thread was started and none runs (a small file done inline): nobody
            # waits on the event, and the next generation, if any, finds it clear as it is.
            idle = not threads and not self.active_workers
            if not idle:
                self.interrupt.set()
            responses = list(self.responses.values())
            self.wake.notify_all()
        for resp in responses:
            resp.abort()
        deadline = time.monotonic() + _STOP_GRACE
        self.ahead.settle(deadline)  # (none of them left inside OpenSSL when the file's call returns)
        for thread in threads:
            thread.join(None if wait else max(0.0, deadline - time.monotonic()))
        if wait and not idle:
            self.interrupt = threading.Event()  # for the next generation (a straggler keeps seeing it set)

    # -- trouble -----------------------------------------------------------
    def _fail(self, exc: BaseException) -> None:
        """An error on another thread (the state saver) ends the transfer."""
        with self.lock:
            if self.fatal is None:
                self.fatal = exc
            self.wake.notify_all()

    def note(self, message: str) -> None:
        self.emit(Event(EventKind.NOTE, self.name, done=self.done.total(), total=self.size, message=message))
