"""``prefetch.as_completed()``: each verified path handed to the caller as soon as its file is placed.

Train while it downloads::

    with prefetch.as_completed(shard_urls, output_dir="shards", max_ahead=2) as paths:
        for path in paths:          # shard 0 as soon as it is verified; the rest keep coming
            train_on(path)

The downloads run on a thread of this process (the same flow as ``ensure``).
Coordinator semantics, as TensorFlow's queue runners had them:

* a file that fails raises at the consumer's next step, as the class ``ensure``
  raises (``NetworkError``, ``IntegrityError``, ...), and the other downloads stop,
  resumable; with ``keep_going=True`` failed files are skipped and the error is
  raised after the last good one;
* leaving early (``break``, ``close()``, the end of a ``with`` block, an exception)
  or a kernel interrupt stops the downloads within about a second; the bytes on
  disk stay resumable and only complete, verified files are ever at a final name.

``as_completed(job="j...")`` follows a background job instead (see ``jobs/follow.py``).
"""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path

from prefetch.errors import ExitCode, UsageError, error_for_exit_code

ORDERS = ("given", "any")


def as_completed(names=None, *, job: str | None = None, order: str = "given", max_ahead: int | None = None,
                 keep_going: bool = False, progress: bool | None = None, on_event=None, interval: float = 0.5,
                 **options) -> "PathStream":
    """An iterator of verified local paths (``pathlib.Path``), each yielded as its file is placed.

    Args:
        names: dataset names and/or URLs, as for ``ensure``; the paths are the files'
            primary paths (a dataset's archive, not its extracted folder).
        job: instead of ``names``: follow a background job that is already running
            (``prefetch.ensure(..., background=True).id``). The job is not stopped or
            slowed by the consumer: ``max_ahead`` does not apply to it, and leaving
            early only stops following. ``status()``/``watch()`` show it as usual.
        order: ``"given"`` (default): in plan order (the names in the order given,
            a dataset's files in registry order), for reproducible epochs; a file
            placed early waits for the ones before it. ``"any"``: as they land.
        max_ahead: at most this many files started ahead of what the consumer has
            taken (disk bounded: about ``max_ahead`` files beyond the one in use).
        keep_going: skip failed files and raise after the last good one, instead of
            stopping everything at the first failure.
        progress: a tqdm.auto bar of the bytes; default on in a notebook or on a terminal.
        on_event: called with each progress ``Event`` (from the download threads).
        interval: with ``job``: seconds between reads of the job record.
        **options: as ``ensure`` (``output_dir``, ``mirror``, ``sha256``, ``limit_rate``, ...).

    Raises:
        UsageError: bad arguments or names (before anything is downloaded); while
        iterating, the class ``ensure`` raises for a failed file, and
        ``InterruptedTransferError`` after a kernel interrupt.
    """
    if order not in ORDERS:
        raise UsageError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if max_ahead is not None and (isinstance(max_ahead, bool) or not isinstance(max_ahead, int) or max_ahead < 1):
        raise UsageError(f"max_ahead must be a whole number of files, 1 or more, got {max_ahead!r}")
    from prefetch.api import switch

    switch(progress, "progress", none_ok=True)
    switch(keep_going, "keep_going")
    if job is not None:
        if names is not None or options:
            raise UsageError("as_completed(job=...) follows a job as it was started: give no names or get options")
        if max_ahead is not None:
            raise UsageError("max_ahead does not apply to a background job: it downloads at its own pace "
                             "(use as_completed(names, max_ahead=N) to bound the disk)")
        from prefetch.jobs import get_job
        from prefetch.jobs.watch import check_interval

        check_interval(interval)
        record = get_job(job)  # JobNotFoundError now, not on the first next()
        feed = _Feed(order=order, max_ahead=None, keep_going=keep_going, total=len(record.files))
        return PathStream(feed, _job_runner(job, feed, interval), what=f"job {record.id}")
    if names is None and not options.get("urls"):
        raise UsageError("as_completed needs names (dataset names or URLs), urls=[...], or job=JOB_ID")
    from prefetch.api import make_request
    from prefetch.flow.planning import plan_request

    request = make_request([] if names is None else names, **options)
    plans, _ = plan_request(request)  # usage errors now, before a thread starts
    feed = _Feed(order=order, max_ahead=max_ahead, keep_going=keep_going, total=len(plans))
    return PathStream(feed, _request_runner(request, feed, on_event, progress),
                      what=f"{len(plans)} file{'s' if len(plans) != 1 else ''}", interrupts=True)


class _Feed:
    """What the download thread and the consumer share (the stream itself is not shared:
    dropping it closes it)."""

    def __init__(self, *, order: str, max_ahead: int | None, keep_going: bool, total: int) -> None:
        self.order, self.max_ahead, self.keep_going, self.total = order, max_ahead, keep_going, total
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.results: dict[int, object] = {}  # index -> FileResult, final, not yet handed over
        self.arrivals: deque[int] = deque()
        self.next_index = 0  # order="given": the next index to hand over
        self.taken = 0  # results the consumer has passed (yielded or skipped)
        self.finished = False  # the download thread has ended
        self.crash: BaseException | None = None  # an error of the run as a whole
        self.failure = None  # the first failed FileResult (it stopped the rest unless keep_going)
        self.failures: list = []
        self.interrupted = False  # a kernel interrupt (SIGINT) stopped the downloads
        self.extra_index = 1 << 40  # results that came without an index (hub repos), at the end
        self.progress: dict[str, tuple[int, int | None, float]] = {}  # downloading file -> done, total, rate

    # -- the download side (any thread) ---------------------------------------------
    def before_start(self, index: int) -> bool:
        with self.cond:
            while not self.stop.is_set() and self.max_ahead is not None and index >= self.taken + self.max_ahead:
                self.cond.wait(0.5)
        return not self.stop.is_set()

    def file_done(self, index: int, result) -> None:
        with self.cond:
            failed = result.status in ("failed", "interrupted") or bool(result.exit_code)
            if failed and result.exit_code != int(ExitCode.INTERRUPTED):
                self.failures.append(result)
                if self.failure is None and not self.keep_going:
                    self.failure = result
                    self.stop.set()  # the others stop, resumable
            self.results[index] = result
            self.arrivals.append(index)
            self.progress.pop(result.name, None)
            self.cond.notify_all()

    def event(self, event) -> None:
        from prefetch.model.events import EventKind

        if event.kind in (EventKind.START, EventKind.PROGRESS):
            with self.cond:
                self.progress[event.file] = (event.done, event.total, event.rate)

    def fail(self, error: BaseException) -> None:
        """The caller's on_event raised: the downloads stop, and the loop raises ``error`` at its next step."""
        with self.cond:
            if self.crash is None:
                self.crash = error
            self.stop.set()
            self.cond.notify_all()

    def end(self, extra=(), crash: BaseException | None = None) -> None:
        with self.cond:
            for result in extra:
                self.file_done(self.extra_index, result)
                self.extra_index += 1
            self.crash = self.crash or crash
            self.finished = True
            self.cond.notify_all()

    # -- the consumer side ---------------------------------------------------------------
    def take(self):
        """The next final result for the consumer, or None when there is none yet (call with ``cond``)."""
        if self.order == "any":
            while self.arrivals:
                index = self.arrivals.popleft()
                if index in self.results:
                    return self.results.pop(index)
            return None
        if self.next_index in self.results:
            result = self.results.pop(self.next_index)
            self.next_index += 1
            return result
        if self.finished and self.results:  # the end: whatever is left (results without an index)
            index = min(self.results)
            self.next_index = index + 1
            return self.results.pop(index)
        return None


class PathStream:
    """The iterator ``as_completed`` returns: iterate it, use it in ``with``, ``close()`` it (twice is fine)."""

    def __init__(self, feed: _Feed, runner, *, what: str, interrupts: bool = False) -> None:
        self._feed = feed
        self._what = what
        self._closed = False
        self._restore_interrupt = lambda: None
        if interrupts:
            from prefetch.ui.interrupt import chain_interrupt

            self._restore_interrupt = chain_interrupt(_InterruptFlag(feed))
        self._owner = threading.current_thread()
        self._thread = threading.Thread(target=runner, name="prefetch-as-completed", daemon=True)
        self._thread.start()

    def __iter__(self) -> "PathStream":
        return self

    def __next__(self) -> Path:
        feed = self._feed
        while True:
            with feed.cond:
                if self._closed:
                    raise StopIteration
                error = self._error_now()
                result = None if error is not None else feed.take()
                if result is not None:
                    feed.taken += 1
                    feed.cond.notify_all()  # a waiting before_start may go on
                    if result.status in ("downloaded", "cached") and not result.exit_code:
                        return Path(result.path)
                    if result.exit_code == int(ExitCode.INTERRUPTED):
                        error = error_for_exit_code(ExitCode.INTERRUPTED, _interrupted_message(feed, result))
                    else:
                        continue  # keep_going: skipped, raised at the end
                elif error is None and feed.finished:
                    error = self._error_at_end()
                    if error is None:
                        self._closed = True
                if error is None and not self._closed:
                    try:
                        feed.cond.wait(0.2)
                    except KeyboardInterrupt:  # waiting here: as ensure, the resumable-stop error
                        feed.interrupted = True
                        feed.stop.set()
                        error = error_for_exit_code(ExitCode.INTERRUPTED, "interrupted: the downloads stopped; "
                                                    "what is on disk resumes on the next call")
                    if error is None:
                        continue
            self.close()
            if error is None:
                raise StopIteration
            raise error

    def _error_now(self) -> BaseException | None:
        feed = self._feed
        if feed.crash is not None:  # the run failed as a whole, or the caller's on_event raised
            return feed.crash
        if feed.failure is not None:
            return error_for_exit_code(feed.failure.exit_code or ExitCode.FAILURE, feed.failure.error or feed.failure.name)
        return None

    def _error_at_end(self) -> BaseException | None:
        failures = self._feed.failures
        if not failures:
            return None
        from prefetch.api import failure_line
        from prefetch.model.plans import overall_exit_code

        message = failure_line(failures, more="the stream's .failed: every one")  # (a few hundred characters)
        return error_for_exit_code(overall_exit_code(failures), f"{len(failures)} file(s) failed: {message}")

    def close(self) -> None:
        """Stop the downloads (resumable) and wait for them to end; later calls do nothing."""
        self._close(wait=True)

    def _close(self, *, wait: bool) -> None:
        feed = self._feed
        with feed.cond:
            self._closed = True
            feed.stop.set()
            feed.cond.notify_all()
        if wait and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        self._restore_interrupt()

    def __enter__(self) -> "PathStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:  # a `for` loop left by `break` drops the last reference
        try:
            # Waiting only on the consumer's thread: the cyclic GC may run this on a download
            # thread, which the run waits for (joining there stalled it for the join's timeout).
            self._close(wait=threading.current_thread() is self._owner)
        except Exception:  # noqa: BLE001 - never raise from a finaliser
            pass

    @property
    def failed(self) -> list:
        """The ``FileResult`` s of the files that failed so far."""
        return list(self._feed.failures)

    def __repr__(self) -> str:
        feed = self._feed
        with feed.cond:
            ready = sum(1 for r in feed.results.values() if not r.exit_code)
            parts = [f"{feed.taken}/{feed.total} taken", f"{ready} ready"]
            if feed.progress:
                done = sum(p[0] for p in feed.progress.values())
                rate = sum(p[2] for p in feed.progress.values())
                parts.append(f"{len(feed.progress)} downloading ({_size(done)}, {_size(rate)}/s)")
            if feed.failures:
                parts.append(f"{len(feed.failures)} failed")
            state = "closed" if self._closed else "done" if feed.finished else "running"
        return f"<as_completed {self._what}, {state}: {', '.join(parts)}>"


class _InterruptFlag:
    """What SIGINT sets: the feed's stop, remembering that it was an interrupt."""

    def __init__(self, feed: _Feed) -> None:
        self._feed = feed

    def set(self) -> None:
        self._feed.interrupted = True
        self._feed.stop.set()


def _interrupted_message(feed: _Feed, result) -> str:
    if feed.interrupted:
        return f"interrupted: {result.name} and the rest stopped; what is on disk resumes on the next call"
    return result.error or f"{result.name}: interrupted; what is on disk resumes on the next call"


def _request_runner(request, feed: _Feed, on_event, progress):
    """The download thread's body: ``run_request`` with the feed's hooks."""

    def run() -> None:
        from prefetch.flow.planning import run_request
        from prefetch.model.events import GuardedSink
        from prefetch.ui.progress import ProgressBar, progress_wanted

        bar = ProgressBar() if (progress if progress is not None else progress_wanted()) else None
        guard = None if on_event is None else GuardedSink(on_event, feed.fail)  # the caller's: raised at the loop
        sinks = [s for s in (feed.event, guard, bar) if s is not None]

        def sink(event) -> None:
            for s in sinks:
                s(event)

        reported: set[int] = set()

        def done(index, result) -> None:
            reported.add(id(result))
            feed.file_done(index, result)

        try:
            results = run_request(request, on_event=sink, stop=feed.stop, before_start=feed.before_start,
                                  on_file_done=done)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            feed.end(crash=exc)
            return
        finally:
            if bar is not None:
                bar.close()
        feed.end(extra=[r for r in results if id(r) not in reported])

    return run


def _job_runner(job_id: str, feed: _Feed, interval: float):
    def run() -> None:
        from prefetch.jobs.follow import follow_job

        try:
            follow_job(job_id, on_file_done=feed.file_done, stop=feed.stop, interval=interval)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            feed.end(crash=exc)
            return
        feed.end()

    return run


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
