"""Many files at once: each through ``fetch_file``, on a bounded pool, one failure harming none.

The files of one run share the engine's hosts (one connection budget, the warm connections
and the route judgement per host: ``engine/hosts.py``); ``engine/many.py`` decides when
each starts. A stop (Ctrl-C, ``--fail-fast``) reaches every file; files not started yet
report "interrupted".
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from prefetch.errors import OPEN_FILES_ERRNOS, ExitCode, PrefetchError, too_many_open_files
from prefetch.model.events import Event, EventKind, EventSink, ignore_event
from prefetch.model.plans import FilePlan, FileResult
from prefetch.flow.files import fetch_file, forget_transfer
from prefetch.flow.options import FetchOptions
from prefetch.flow.leftovers import LeftoverScan


def fetch_files(
    plans: Sequence[FilePlan],
    *,
    options: FetchOptions,
    state: Path,
    on_event: EventSink = ignore_event,
    stop: threading.Event | None = None,
    before_start: Callable[[int], bool] | None = None,
    on_file_done: Callable[[int, FileResult], None] | None = None,
) -> list[FileResult]:
    """Fetch several files at once; one failure does not harm the others.

    ``state`` is prefetch's state dir: file locks go to ``state/locks``, records of
    past extractions to ``state/extracted``.

    Files start in the order of ``plans`` (they may finish in any order), as many at
    once as ``options.max_parallel_files`` says (default: a host's connection budget);
    they share one connection budget, the warm connections and the route judgement per
    host (``engine/hosts.py``). ``before_start(i)`` is called before file ``i`` starts
    (it may block); False leaves it "interrupted" (not started). ``on_file_done(i,
    result)`` is called once per file as soon as its result is final, from any thread.

    With ``options.fail_fast`` the first failure asks every other file to stop
    cleanly (their state is saved and they report "interrupted").
    """
    from prefetch.engine.many import files_in_flight, near_limit, run_in_order, shared_hosts

    stop = stop or threading.Event()
    results: list[FileResult | None] = [None] * len(plans)
    transfer, own_hosts = shared_hosts(options.transfer, on_event, stop)
    options = replace(options, transfer=transfer)

    def finish(index: int, result: FileResult) -> None:
        results[index] = result
        if on_file_done is not None:
            on_file_done(index, result)

    leftovers = LeftoverScan()  # each directory listed once for the whole run
    locks_dir, markers_dir, records_dir = state / "locks", state / "extracted", state / "placed"

    def run(index: int) -> None:
        plan = plans[index]
        got: list[FileResult] = []
        try:
            _run(index, plan, got)
        finally:  # one result per file, even when an event sink raised (that still propagates)
            if results[index] is None:
                finish(index, got[0] if got else _failed(plan, PrefetchError(f"{plan.label}: internal error")))

    def failed(plan: FilePlan, exc: PrefetchError, keep) -> FileResult:
        """``plan``'s failure, kept (``keep(result)``) then said (FAILED): a sink that raises on the
        event never takes the file's own error from the run. With ``--fail-fast`` (or a stop)
        nothing more starts."""
        result = _failed(plan, exc)
        keep(result)
        if options.fail_fast or exc.exit_code == ExitCode.INTERRUPTED:
            stop.set()  # (before the failure is said: nothing is placed once it is known)
        on_event(Event(EventKind.FAILED, plan.label, message=str(exc), exit_code=int(exc.exit_code)))
        return result

    def _run(index: int, plan: FilePlan, got: list[FileResult]) -> None:
        try:
            if stop.is_set():
                from prefetch.errors import InterruptedTransferError

                raise InterruptedTransferError(f"{plan.label}: not started (stopped)")
            result = fetch_file(
                plan, options=options, locks_dir=locks_dir, markers_dir=markers_dir,
                records_dir=records_dir, on_event=on_event, stop=stop, leftovers=leftovers,
            )
        except PrefetchError as exc:
            result = failed(plan, exc, got.append)
        except Exception as exc:  # noqa: BLE001 - a bug: this file fails, the others go on
            if isinstance(exc, OSError) and exc.errno in OPEN_FILES_ERRNOS:  # the machine's limit, no bug
                result = failed(plan, too_many_open_files(plan.label), got.append)
            else:
                result = _failed(plan, PrefetchError(f"{plan.label}: internal error: {exc!r}"))
                got.append(result)
                on_event(Event(EventKind.FAILED, plan.label, message=result.error, exit_code=result.exit_code))
        got[:] = [result]
        if options.sources is not None:
            options.sources.finish(plan, result, on_event=on_event, stop=stop)  # seeds the team store
        finish(index, result)

    lane = _Lane(plans, options) if before_start is None and len(plans) >= _Lane.FEWEST else None

    def run_lane(index: int) -> None:
        """``run(index)``, or a chunk of fresh small files from ``index`` on through the bulk lane
        (``flow/file_batch.py``); a file the lane hands back runs through ``run`` here."""
        if index in lane.handed:
            run(index)  # (a file a chunk handed back, run again by the scheduler: the usual way)
            return
        got = lane.chunk_from(index, stop)
        if got is None:
            run(index)
            return
        if not got:
            return  # (a chunk owns it: placed there, or run there after the lane handed it back)
        from prefetch.flow.file_batch import fetch_batch

        host, chunk = got
        from prefetch.engine.bulk import host_ready

        lane_held = [True]

        def off_wire(all_asked: bool, back: list[int]) -> None:
            """The chunk is off the wire: the files it handed back start now, and with nothing left
            to ask the host's next chunk may start while this one is flushed and placed (files
            left unasked keep the lane: asked next)."""
            lane.hand_back(back)
            if back and options.fail_fast:
                # (--fail-fast: a file handed back may fail the run; the rest of the list goes the
                # usual way, which starts nothing once a file failed: no further chunk either)
                lane.close()
            if all_asked and lane_held[0]:
                lane_held[0] = False
                lane.ended(host)

        try:
            while chunk:
                placed, back, unsent = {}, [i for i, _, _ in chunk], []
                try:
                    placed, back, unsent = fetch_batch(chunk, host=host, options=options, locks_dir=locks_dir,
                                                       records_dir=records_dir, on_event=on_event, stop=stop,
                                                       leftovers=leftovers, off_wire=off_wire)
                except Exception:  # noqa: BLE001 - a bug in the lane: its files go the usual way  # pragma: no cover
                    pass
                errors = {i: r for i, r in placed.items() if isinstance(r, PrefetchError)}  # (a .part changed)
                for i, result in placed.items():  # every result kept before any failure is said
                    finish(i, _failed(plans[i], result) if i in errors else result)
                for i, exc in errors.items():
                    failed(plans[i], exc, lambda _result: None)
                lane.hand_back(back)
                # Not asked for in the chunk's time: the next chunk, or the usual way once the lane is off.
                left = set(unsent)
                if not placed and not back and len(left) == len(chunk):
                    host.wait_for_slot(1.0)  # (nothing asked: no slot free; asking again at once spun)
                chunk = [entry for entry in chunk if entry[0] in left]
                if options.fail_fast and back:
                    lane.close()  # (as in off_wire)
                if chunk and (stop.is_set() or not host_ready(host, options.transfer) or not lane.on):
                    lane.hand_back([i for i, _, _ in chunk])
                    chunk = []
        finally:
            if lane_held[0]:
                lane.ended(host)

    def not_started(index: int) -> None:
        from prefetch.errors import InterruptedTransferError

        finish(index, _failed(plans[index], InterruptedTransferError(f"{plans[index].label}: not started")))

    workers = files_in_flight(len(plans), limit=options.max_parallel_files,
                              host_connections=options.transfer.host_connections)
    if len(plans) > 1:  # renderers summarize a run of many files (Event.files)
        on_event(Event(EventKind.NOTE, "prefetch", files=len(plans),
                       message=f"{len(plans)} files, up to {workers} at once"))
    if workers > 1:
        # Imported here, before the files' threads: the state and lock records import it lazily,
        # and where one thread's import fails (EMFILE under a tiny `ulimit -n`) CPython hands a
        # second thread, waiting on that import, the half-made module ("module 'json' has no
        # attribute 'dumps'", an internal error instead of the too-many-open-files line).
        import json  # noqa: F401

        import prefetch.net.direct  # noqa: F401  (the same for the requests' route: "cannot import name 'plain_url'")
    try:
        hosts = options.transfer.hosts
        run_in_order(len(plans), run_lane if lane is not None else run, workers=workers, stop=stop,
                     before_start=before_start, not_started=not_started, taken=lane.taken if lane is not None else None,
                     again=lane.again if lane is not None else None,
                     limit=near_limit(hosts, workers, flushing=options.transfer.sync_data) if hosts is not None else None)
    finally:
        if own_hosts is not None:
            own_hosts.close()
        forget_transfer(options.transfer)
        leftovers.remove_empty_created()  # (-P newdir of files that all failed before a byte: no empty newdir)
    return [r for r in results if r is not None]


class _Lane:
    """Which files the bulk lane takes (``flow/file_batch.py``): from a file on, the next fresh
    small files of its host, once that host is near (its first files came the usual way)."""

    FEWEST = 16  # a shorter list never takes the lane
    CHUNK = 256  # files per chunk: one flush each; a stop discards at most this many bodies (128: 6 of 8 pairs slower)
    SCOUT_WAIT = 0.05  # seconds the files after a host's first wait for its first answer (a long route: 0.04)
    SCOUT_POLL = 0.001  # ... looking this often (the answer comes from a file's thread, which notifies nobody)
    LANES = 1  # chunks of one host in flight at once (a second one: 6 of 6 pairs slower, 1.23 s against 1.03 s)

    def __init__(self, plans, options) -> None:
        from prefetch.engine import bulk

        self.plans, self.options = plans, options
        self.on = bulk.enabled() and options.sources is None
        self.lock = threading.Condition()
        self.running: dict = {}  # host -> chunks in flight
        self.claimed: set[int] = set()
        self.urls: dict[int, str | None] = {}
        self.eligible = None  # file_batch.eligible, imported with the first file looked at
        self.known: dict = {}  # scheme://host -> direct there, no proxy or credentials (bulk.direct_url)
        self.waiting: dict = {}  # host -> indexes of the threads waiting for its lane
        self.handed: set[int] = set()  # files a chunk handed back ...
        self.again: deque[int] = deque()  # ... that the scheduler has yet to run (engine.many.run_in_order)
        self.scouts: dict = {}  # host -> when its first file went the usual way (no answer from it yet)

    def close(self) -> None:
        """No more chunks in this run: every file not yet in one goes the usual way."""
        with self.lock:
            self.on = False
            self.lock.notify_all()

    def hand_back(self, indexes) -> None:
        """Files a chunk handed back (or could not ask for before the lane went off): the scheduler
        runs them the usual way on its free threads, side by side, before the files not started yet
        (run one after another on the chunk's thread, a slow server's list took 18 s instead of 4)."""
        for index in indexes:
            self.handed.add(index)
            self.again.append(index)

    def taken(self, index: int) -> bool:
        """A chunk took file ``index`` (the scheduler skips it)."""
        return index in self.claimed

    def _url(self, index: int) -> str | None:
        url = self.urls.get(index, False)
        if url is False:
            if self.eligible is None:
                from prefetch.flow.file_batch import eligible

                self.eligible = eligible  # (a `from` import costs 2-5 us: once a run, not once a file)
            url = self.urls[index] = self.eligible(self.plans[index], self.options, self.known)
        return url

    def chunk_from(self, index: int, stop: threading.Event) -> tuple | None:
        """``(host, [(index, plan, url), ...])``: the chunk starting at ``index``; () when a chunk
        already has it; None when it goes the usual way.

        While ``LANES`` chunks of its host are in flight, the thread waits (idle: more threads on
        the lane only hand the interpreter lock around); the waiting thread with the host's
        lowest file takes the next chunk when one ends (a later one would leave the files before
        it to a chunk of their own, after the others), and every waiting thread looks again when
        a chunk takes files or ends (one whose file a chunk took is free at once).

        Before the host has answered anything, the first of its files goes the usual way (the
        scout) and the next ones wait up to ``SCOUT_WAIT`` for that answer: a near host's comes in
        a few milliseconds and its files then take the lane, instead of a file per thread going
        the usual way until one of them has answered; a far or silent host's files go the usual
        way once the wait is over (a long route answers in more than ``SCOUT_WAIT`` anyway)."""
        if not self.on:
            return None
        from prefetch.engine import bulk

        with self.lock:
            host = None
            try:
                while True:
                    if index in self.claimed:
                        return ()
                    if stop.is_set() or not self.on:
                        return self._usual(index)
                    url = self._url(index)
                    if url is None:
                        return self._usual(index)
                    host = self.options.transfer.hosts.host_for(url)
                    if not bulk.host_ready(host, self.options.transfer):
                        if host.route.fastest is not None or not bulk.host_ready(host, self.options.transfer,
                                                                                 judged=False):
                            return self._usual(index)
                        scout = self.scouts.get(host)
                        if scout is None:
                            self.scouts[host] = time.monotonic()
                            return self._usual(index)  # the scout: its answer tells whether the host is near
                        left = scout + self.SCOUT_WAIT - time.monotonic()
                        if left <= 0:
                            return self._usual(index)
                        self._wait(host, index, min(left, self.SCOUT_POLL) if self._lowest(host, index) else left)
                        continue
                    if self.running.get(host, 0) < self.LANES and self._lowest(host, index):
                        break
                    self._wait(host, index, 0.2)
            finally:
                if host is not None and index in self.waiting.get(host, ()):
                    self.waiting[host].discard(index)
            chunk = []
            at = index
            while at < len(self.plans) and len(chunk) < self.CHUNK and at not in self.claimed:
                url = self._url(at)
                if url is None or self.options.transfer.hosts.host_for(url) is not host:
                    break
                chunk.append((at, self.plans[at], url))
                at += 1
            if len(chunk) < 2:
                return self._usual(index)
            self.claimed.update(i for i, _, _ in chunk)
            self.running[host] = self.running.get(host, 0) + 1
            self.lock.notify_all()  # (the threads waiting with a file of this chunk are free)
            return host, chunk

    def _lowest(self, host, index: int) -> bool:
        """No thread with an earlier file of ``host`` waits for its lane."""
        waiting = self.waiting.get(host)
        return not waiting or index <= min(waiting)

    def _wait(self, host, index: int, seconds: float) -> None:
        """Wait (under the lock) as one of ``host``'s files waiting for the lane."""
        self.waiting.setdefault(host, set()).add(index)
        self.lock.wait(seconds)

    def _usual(self, index: int) -> None:
        """File ``index`` goes the usual way (under the lock): no chunk may take it after this, or a
        chunk starting at an earlier file would fetch it too while ``fetch_file`` runs it (two
        results, two log lines, as a ``-b`` list once showed)."""
        self.claimed.add(index)
        self.lock.notify_all()  # (a thread waiting behind this file may now be the lowest)
        return None

    def ended(self, host) -> None:
        """A chunk of ``host`` ended: the waiting threads look again (the lowest takes the next chunk)."""
        with self.lock:
            self.running[host] -= 1
            self.lock.notify_all()


def _failed(plan: FilePlan, exc: PrefetchError) -> FileResult:
    return FileResult(
        dataset=plan.dataset,
        name=plan.label,
        path=str(plan.final),
        paths=[str(p) for p in plan.paths],
        status="interrupted" if exc.exit_code == ExitCode.INTERRUPTED else "failed",
        error=str(exc),
        exit_code=int(exc.exit_code),
    )

