"""Many files at once: start them in order on a bounded set of threads, finish them in any order.

:func:`run_in_order` is the scheduler both ``flow/file_list.py`` (datasets, URLs, ``-i`` lists)
and ``hf/download.py`` (repos) use. It only decides *when* a file starts; how many
connections each gets is the host's business (``engine/hosts.py``): the files in flight
share one budget per host, so starting many of them at once costs no extra connections.
It measures what a file costs on its own thread (:class:`FileCost`) and hands that to
``limit``, which sizes the files in flight from it (:meth:`Hosts.files_now`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable

from prefetch.engine.hosts import BUSY, Hosts

_POLL = 0.2  # seconds: the caller's thread wakes this often, so Ctrl-C reaches it


class Busy:
    """How busy the files kept the interpreter over the last ``KEEP`` file ends, and with how
    many in flight: ``(cpu, files)``, the CPU seconds the files took on their own threads
    (``time.thread_time``: the interpreter lock's hand-offs between them included, another
    thread's work, a training loop in the same kernel say, not) per wall second, and the mean
    count of files running at those ends. None until ``FEWEST`` files have ended (and a
    little time has passed)."""

    KEEP = 16
    FEWEST = 4

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ends: deque[tuple[float, float, int]] = deque(maxlen=self.KEEP)  # (wall, the file's CPU, files running)

    def ended(self, cpu: float, running: int) -> None:
        """A file that took ``cpu`` seconds on its thread ended while ``running`` files (itself
        included) were in flight."""
        sample = (time.monotonic(), cpu, running)
        with self._lock:
            self._ends.append(sample)

    def now(self) -> tuple[float, float] | None:
        with self._lock:
            if len(self._ends) < self.FEWEST:
                return None
            ends = list(self._ends)
        took = ends[-1][0] - ends[0][0]
        if took < 0.005:
            return None
        # The CPU of the files that ended after the first one, over the time since it ended: in a
        # steady run, what the files in flight spend in that time. (One loop: this runs per file.)
        cpu = -ends[0][1]
        files = 0
        for _, spent, running in ends:
            cpu += spent
            files += running
        return cpu / took, files / len(ends)


def files_in_flight(count: int, *, limit: int | None, host_connections: int) -> int:
    """How many files run at once: ``limit`` when given, else as many as a host has connections."""
    wanted = limit if limit is not None else host_connections
    return max(1, min(wanted, count))


FLUSHING_FILES = 2  # at least this many files in flight on a near host when each file's data is flushed


def near_limit(hosts: Hosts, workers: int, *, flushing: bool) -> Callable[[tuple[float, float] | None], int]:
    """``run_in_order``'s ``limit`` for a run's files on ``hosts``: :meth:`Hosts.files_now`, and
    with ``flushing`` (``TransferOptions.sync_data``: each file's ``.part`` is ``fdatasync``ed
    before its rename) never fewer than ``FLUSHING_FILES`` while the files in flight leave the
    interpreter idle (``busy``: under ``BUSY`` CPU seconds a second a file). A small file's flush
    waits on the disk with the interpreter idle: on loopback ~0.4 ms of a 16 KiB file's ~1.4 ms,
    and one file in flight kept the process at ~0.75 CPU seconds a second, which ``files_now``
    rounds down to one file; with a second file in flight one file's flush overlaps the other's
    request. Files that keep the interpreter busy (large ones on a fast link) stay as
    ``files_now`` says, and so do files that are not flushed (a second one only added
    interpreter-lock hand-offs)."""
    least = min(FLUSHING_FILES, workers) if flushing else 1

    def limit(busy: tuple[float, float] | None) -> int:
        files = hosts.files_now(workers, busy)
        if files < least and busy is not None and busy[0] < BUSY * busy[1]:
            return least
        return files

    return limit


def run_in_order(count: int, run_one: Callable[[int], None], *, workers: int, stop: threading.Event,
                 before_start: Callable[[int], bool] | None = None,
                 not_started: Callable[[int], None] | None = None,
                 limit: Callable[[tuple[float, float] | None], int] | None = None,
                 taken: Callable[[int], bool] | None = None,
                 again: deque | None = None) -> None:
    """Call ``run_one(i)`` for ``i`` in ``range(count)`` on up to ``workers`` threads, started in index order.

    ``before_start(i)`` runs on the caller's thread just before file ``i`` starts (it may
    block: a consumer's back-pressure); False means "do not start it" and
    ``not_started(i)`` reports it instead. Once ``stop`` is set the files not yet started
    still go through ``run_one`` (which sees the stop and reports them interrupted) on
    the caller's thread, without waiting for a free thread. ``run_one`` must not raise.
    A KeyboardInterrupt sets ``stop`` and waits for the running files to save their state.
    ``limit(busy)``, when given, is how many files may run now (at most ``workers``): it
    may change as the run learns its hosts' routes and how busy the files keep the process
    (:meth:`Hosts.files_now`; ``busy`` is :meth:`Busy.now`, None at first).
    ``taken(i)``, when given (without ``before_start`` only): file ``i`` was already run by
    another file's ``run_one`` (a chunk of the bulk lane, ``flow/file_batch.py``): skipped.
    ``again``, when given (with ``taken``): the files such a chunk handed back (it appends them),
    run through ``run_one`` again before any file not started yet, on the threads free for
    files: side by side as the others, not one after another on the chunk's thread.
    """
    if workers <= 1 and before_start is None:
        for i in range(count):
            run_one(i)
            while again:
                run_one(again.popleft())
        return
    busy = Busy()
    run_one = _measured(run_one, busy)
    allowed = None if limit is None else (lambda: limit(busy.now()))
    if before_start is None:
        _run_pulled(count, run_one, workers=workers, stop=stop, limit=allowed, taken=taken, again=again)
        return
    from concurrent.futures import ThreadPoolExecutor

    free = threading.Semaphore(max(1, workers))
    futures = []
    running = [0]
    changed = threading.Condition()

    def body(i: int) -> None:
        try:
            run_one(i)
        finally:
            with changed:
                running[0] -= 1
                changed.notify()
            free.release()

    def room() -> bool:
        """Wait (in short slices) until ``allowed()`` lets one more file start; False: look again."""
        with changed:
            if running[0] < allowed():
                return True
            changed.wait(_POLL)
            return running[0] < allowed()

    index = 0
    # A pool: its threads go from file to file (starting a thread per file costs more than a small file).
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="prefetch-file")
    try:
        while index < count:
            if stop.is_set():
                run_one(index)
                index += 1
                continue
            if allowed is not None and not room():
                continue
            if not free.acquire(timeout=_POLL):
                continue
            if before_start is not None and not before_start(index):
                free.release()
                (not_started or run_one)(index)
                index += 1
                continue
            with changed:
                running[0] += 1
            futures.append(pool.submit(body, index))
            index += 1
        for future in futures:
            while not future.done():
                _wait(future)
    except KeyboardInterrupt:
        stop.set()
        while index < count:  # the rest report "not started"
            run_one(index)
            index += 1
        for future in futures:
            future.exception()
    finally:
        pool.shutdown(wait=False)


def _run_pulled(count: int, run_one: Callable[[int], None], *, workers: int, stop: threading.Event,
                limit: Callable[[], int] | None, taken: Callable[[int], bool] | None = None,
                again: deque | None = None) -> None:
    """:func:`run_in_order` without ``before_start``: each thread takes the next file itself
    when it is free, so a file's end wakes no other thread (handing each file from the
    caller's thread to a pool cost a future, a wake-up each way and their locks).

    Files start in index order (taken under one lock). A thread that finds ``limit()``
    files running ends; the caller's thread looks every ``_POLL`` seconds (and when a
    thread ends) and starts threads while there is room (the limit changes as hosts
    answer): no idle thread wakes up to look (31 of them polling cost more GIL hand-offs
    than the files). Once ``stop`` is set the caller's thread takes the files not started
    too (``run_one`` reports them interrupted).
    """
    lock = threading.Lock()
    ended = threading.Event()
    state = [0, 0, 0]  # the next index to start, the files running, the threads alive
    again = again if again is not None else ()  # (indexes given back to run again: before the next index)

    def take() -> int | None:
        """The next index; None: none left, or no room now (``limit()`` files run)."""
        with lock:
            if taken is not None:
                while state[0] < count and taken(state[0]):
                    state[0] += 1  # (run already, in another file's chunk)
            if not stop.is_set() and limit is not None and state[1] >= limit():
                return None
            if again:
                state[1] += 1
                return again.popleft()  # (a file a chunk handed back: before the files not started yet)
            if state[0] >= count:
                return None
            if again:
                state[1] += 1
                return again.popleft()
            state[0] += 1
            state[1] += 1
            return state[0] - 1

    def done() -> None:
        with lock:
            state[1] -= 1

    def work() -> None:
        try:
            while (index := take()) is not None:
                try:
                    run_one(index)
                finally:
                    done()
        finally:
            with lock:
                state[2] -= 1
            ended.set()

    def room() -> int:
        with lock:
            left = count - state[0] + (len(again) if again is not None else 0)
            if left <= 0:
                return 0
            allowed = workers if limit is None else min(workers, limit())
            return max(0, min(allowed - state[1], workers - state[2], left))

    started = 0
    try:
        while True:
            if stop.is_set():
                _rest_here(take, done, run_one)
            for _ in range(room()):
                with lock:
                    state[2] += 1
                started += 1
                threading.Thread(target=work, name=f"prefetch-file-{started}", daemon=True).start()
            with lock:
                if state[0] >= count and not state[2] and not again:
                    return
            ended.wait(_POLL)  # short waits: Ctrl-C reaches the caller's thread
            ended.clear()
    except KeyboardInterrupt:
        stop.set()
        _rest_here(take, done, run_one)  # the rest report "not started"
        while True:
            with lock:
                if not state[2]:
                    return
            ended.wait(_POLL)
            ended.clear()


def _measured(run_one: Callable[[int], None], busy: Busy) -> Callable[[int], None]:
    """``run_one`` that tells ``busy`` what each file took on its thread and how many files were
    in flight when it ended."""
    lock = threading.Lock()
    clock = time.thread_time
    running = [0]

    def measured(i: int) -> None:
        with lock:
            running[0] += 1
        began = clock()
        try:
            run_one(i)
        finally:
            cpu = clock() - began
            with lock:
                busy.ended(cpu, running[0])
                running[0] -= 1

    return measured


def _rest_here(take, done, run_one) -> None:
    """After a stop: run the files not yet started on this thread (each reports interrupted at once)."""
    while (index := take()) is not None:
        try:
            run_one(index)
        finally:
            done()


def _wait(future) -> None:
    from concurrent.futures import TimeoutError as FutureTimeout

    try:
        future.exception(timeout=_POLL)  # short waits: Ctrl-C reaches the caller's thread
    except FutureTimeout:
        pass


def shared_hosts(options, on_event, stop: threading.Event | None = None) -> tuple[object, Hosts | None]:
    """``options`` (TransferOptions) with a :class:`Hosts` for this run, and that Hosts when new (to close)."""
    from dataclasses import replace

    if options.hosts is not None:
        return options, None
    hosts = Hosts(budget=options.host_connections, long_route=options.long_route, on_event=on_event, stop=stop,
                  slots_dir=options.slots_dir)
    return replace(options, hosts=hosts), hosts
