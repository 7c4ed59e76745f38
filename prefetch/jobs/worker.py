"""The background worker: ``python -m prefetch.jobs.worker JOB_ID``.

Started detached by ``prefetch.jobs.start_job`` (new session, stdio on the job
log). It runs the job's ``GetRequest`` with an event sink that writes plain log
lines and rewrites the job record about once a second, stops cleanly on
SIGTERM (``prefetch cancel``: state saved, job ``cancelled``, exit 7) and
records the final state and exit code.

Test hook (for the test suite only; does nothing unless set):
``PREFETCH_TEST_PAUSE_AT=KIND[:N]`` makes the worker pause at the N-th (default
first) event of KIND (``verify``, ``extract``, ``start``, ...) for
``PREFETCH_TEST_PAUSE_SECONDS`` (default 60) seconds, after logging
``test hook: pausing at KIND``, so a test can kill it in that phase.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from prefetch.errors import ExitCode, LocalFileError
from prefetch.fs.files import remove_dead_temps

HEARTBEAT_SECONDS = 20.0  # the record is rewritten at least this often while running
RUN_LOCK_WAIT_SECONDS = 15.0  # how long a new worker waits for the job's previous one to exit


def main(argv: list[str] | None = None) -> int:
    """Run one job; the exit code is the job's."""
    stop = threading.Event()
    signalled: list[int] = []

    def on_signal(signum, frame) -> None:
        signalled.append(signum)
        stop.set()

    # First thing: a cancel that arrives while we start up must still be clean.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    directory = os.environ.pop("PREFETCH_WORKER_DIR", None)  # (jobs/launch.py: a posix_spawn start)
    if directory:
        os.chdir(directory)  # not the caller's directory: it may go away
    # --header values: read once from the environment, then out of it (see request.job_environment).
    from prefetch.flow.request import HEADERS_ENV

    headers = os.environ.pop(HEADERS_ENV, None)
    url_passwords = os.environ.pop("PREFETCH_JOB_URLS", None)  # flow.request.URLS_ENV, the same way
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m prefetch.jobs.worker JOB_ID", file=sys.stderr)
        return int(ExitCode.USAGE)
    from prefetch.errors import PrefetchError
    from prefetch.jobs.out_of_files import SpareDescriptors, out_of_files, record_out_of_files

    spare = SpareDescriptors()  # given back to write the job's end when no descriptor is left
    try:
        env = dict(os.environ)
        if headers:
            env[HEADERS_ENV] = headers
        if url_passwords:
            env["PREFETCH_JOB_URLS"] = url_passwords
        return run_job(args[0], stop=stop, signalled=signalled, env=env, spare=spare)
    except (PrefetchError, ValueError, OSError, ImportError) as exc:  # no such job, its record corrupt or unread
        if not out_of_files(exc):
            if isinstance(exc, (OSError, ImportError)):
                raise  # (as before: a bug's traceback in the log)
            print(f"prefetch worker: {exc}", file=sys.stderr)
            return int(getattr(exc, "exit_code", ExitCode.USAGE))
        return record_out_of_files(args[0], env, spare)


def run_job(job_id: str, *, stop: threading.Event, signalled: list[int], env: Mapping[str, str] | None = None,
            spare=None) -> int:
    """Run job ``job_id`` in this process until it ends or ``stop`` is set; the job's exit code.

    Raises:
        JobNotFoundError, UsageError: no such job. ValueError: its record is corrupt.
    """
    from prefetch import jobs

    env = os.environ if env is None else env
    record = jobs.load_record(job_id, env)
    # Before any thread starts: Linux keeps nice and the I/O class per thread, new ones inherit.
    manners = _lower_priority(record)
    run_lock = jobs.hold_run_lock(job_id, env)  # held until this process ends: proof of identity for cancel
    # The job's last worker may still be exiting (it wrote "cancelled" and `cancel` returned;
    # `prefetch cancel J; prefetch resume J` in one cell): its lock goes with it, wait for that.
    deadline = time.monotonic() + RUN_LOCK_WAIT_SECONDS
    while run_lock is None and time.monotonic() < deadline and not stop.is_set():
        time.sleep(0.05)
        run_lock = jobs.hold_run_lock(job_id, env)
    if run_lock is None:
        print(f"prefetch worker: another worker runs job {job_id}", file=sys.stderr)
        return int(ExitCode.USAGE)
    # A worker killed while it rewrote the record left its temp file: gone before this one writes.
    remove_dead_temps(jobs.record_path(job_id, env))
    log = _open_log(record, env)
    progress = JobProgress(job_id, record.files, log=log, stop=stop, env=env, signalled=signalled, spare=spare)
    started = time.monotonic()
    try:
        claimed = progress.claim()
        if claimed is not None:
            return claimed
        progress.log_line(f"job {job_id} running (pid {os.getpid()}, attempt {record.attempts}, {manners})")
        code = _run(record, progress, stop=stop, signalled=signalled, env=env)
    except BaseException as exc:  # noqa: BLE001 - a bug: record it, keep the traceback in the log
        from prefetch.jobs.out_of_files import finish_out_of_files, out_of_files

        if out_of_files(exc):  # (no bug: `import traceback` would need a file too) the foreground's line
            code = finish_out_of_files(progress, job_id)
        else:
            import traceback

            traceback.print_exc(file=log)
            progress.finish(state="failed", exit_code=int(ExitCode.FAILURE), error=f"internal error: {exc!r}")
            code = int(ExitCode.FAILURE)
    elapsed = time.monotonic() - started
    progress.log_line(f"job {job_id} {progress.final_state} exit={code} in {elapsed:.1f}s")
    log.close()
    return code


def _polite(record) -> bool:
    """Whether the job runs politely (low priority, few connections): not ``--no-nice``."""
    return not (isinstance(record.request, dict) and record.request.get("nice") is False)


def _lower_priority(record) -> str:
    """Nice 19 and the idle I/O class unless the request said ``--no-nice``; what was done, for the log."""
    if not _polite(record):
        return "normal priority (--no-nice)"
    from prefetch.jobs.priority import lower_priority

    return lower_priority()


def _open_log(record, env: Mapping[str, str]) -> TextIO:
    from prefetch.jobs import jobs_dir

    path = Path(record.log) if record.log else jobs_dir(env) / f"{record.id}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    from prefetch.fs.safefs import open_file

    fd = open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)  # never through a planted link
    from prefetch.jobs.log_file import JobLog

    return JobLog(fd)  # a line the disk refuses is dropped, never fatal to the job


def _run(record, progress: JobProgress, *, stop: threading.Event, signalled: list[int], env) -> int:
    from prefetch.errors import PrefetchError
    from prefetch.model.plans import FileResult
    from prefetch.flow.request import GetRequest
    from prefetch.flow.planning import plan_once, run_request

    request = GetRequest.from_dict(record.request)
    request.job = record.id
    if request.headers:  # values come through the environment, never from the record
        from prefetch.flow.request import restore_headers

        request.headers = restore_headers(request.headers, env)
    from prefetch.flow.request import restore_url_passwords

    restore_url_passwords(request, env)  # URL passwords too
    if _polite(record):
        # Where one connection is as fast as many (loopback, a LAN), take one
        # (engine/ramp.py, Ramp._watch_one); PREFETCH_ONE_CONNECTION_RATE overrides.
        from prefetch.engine.options import POLITE_ONE_CONNECTION_RATE

        env = {"PREFETCH_ONE_CONNECTION_RATE": f"{POLITE_ONE_CONNECTION_RATE:g}", **env}
    try:
        planned = plan_once(request, env=env)  # a registry that changed since: fail the job, not the worker
        results: list[FileResult] = run_request(request, on_event=progress, stop=stop, env=env, planned=planned)
    except PrefetchError as exc:
        progress.log_line(f"job {record.id} failed: {exc}")
        return progress.finish(state="failed", exit_code=int(exc.exit_code), error=str(exc))
    from prefetch.model.plans import overall_exit_code

    code = overall_exit_code(results)
    if code == 0:
        state = "done"
    elif code == int(ExitCode.INTERRUPTED):
        state = "cancelled" if signalled else "interrupted"
    else:
        state = "failed"
    error = None
    if code:
        error = "; ".join(r.error or "" for r in results if _failed(r) and r.exit_code == code)
    progress.apply_results(results, cancelled=bool(signalled))
    return progress.finish(state=state, exit_code=code, error=error)


def _failed(result) -> bool:
    return result.status in ("failed", "interrupted") or bool(result.exit_code)


class JobProgress:
    """The worker's event sink: log lines plus the per-file state in the job record."""

    def __init__(self, job_id: str, files, *, log: TextIO, stop: threading.Event, env,
                 signalled: list[int] | None = None, spare=None) -> None:
        from prefetch.ui.render import LineRenderer

        self.spare = spare  # descriptors given back to write the end (jobs/out_of_files.py)
        self.job_id = job_id
        self.files = files
        self.by_name: dict[str, list] = {}
        for f in files:
            self.by_name.setdefault(f.name, []).append(f)
        self.log = log
        self.renderer = LineRenderer(log)
        self.stop = stop
        self.signalled = signalled if signalled is not None else []
        self.env = env
        self.lock = threading.Lock()
        self.dirty = False
        self.closed = threading.Event()
        self.final_state = "running"
        self.flusher: threading.Thread | None = None
        self.pause_at, self.pause_count = _pause_hook(env)
        self.seen: dict[str, int] = {}

    # -- record ------------------------------------------------------------------
    def claim(self) -> int | None:
        """Mark the record running with our pid; an exit code if we must not run."""
        from prefetch import jobs

        refused: list[int] = []

        def take(rec) -> None:
            if rec.state == jobs.JobState.CANCELLED.value:
                refused.append(int(ExitCode.INTERRUPTED))
                return
            other = rec.pid not in (None, os.getpid()) and jobs.is_process_alive(rec.pid, rec.pid_start)
            if other and rec.state == jobs.JobState.RUNNING.value:
                refused.append(int(ExitCode.USAGE))
                return
            rec.state = jobs.JobState.RUNNING.value
            rec.pid = os.getpid()
            rec.pid_start = jobs.process_start_time(os.getpid())
            rec.host = jobs.this_host()  # what refresh_state compares with

        jobs.update_record(self.job_id, take, self.env)
        if refused:
            cancelled = refused[0] == int(ExitCode.INTERRUPTED)
            self.final_state = "cancelled" if cancelled else "refused"
            self.log_line(f"job {self.job_id} not started: {'cancelled' if cancelled else 'another worker runs it'}")
            return refused[0]
        self.flusher = threading.Thread(target=self._flush_loop, name="prefetch-job-record", daemon=True)
        self.flusher.start()
        return None

    def _flush_loop(self) -> None:
        last = time.monotonic()
        while not self.closed.wait(1.0):
            # A heartbeat even when nothing moves (e.g. waiting for another
            # process's lock): readers on other hosts judge liveness by it.
            heartbeat = time.monotonic() - last >= HEARTBEAT_SECONDS
            if self.flush(force=heartbeat):
                last = time.monotonic()

    def flush(self, *, force: bool = False) -> bool:
        """Write the per-file state into the record if it changed (or ``force``); True if written."""
        from prefetch import jobs

        with self.lock:
            if not (self.dirty or force) or (self.closed.is_set() and not force):
                return False
            self.dirty = False
            snapshot = [replace(f) for f in self.files]

        def put(rec) -> None:
            rec.files = snapshot

        try:
            jobs.update_record(self.job_id, put, self.env)
        except Exception as exc:  # noqa: BLE001 - a status glitch must not stop the download
            self.log_line(f"job {self.job_id} could not update its record: {exc}")
            return False
        return True

    def finish(self, *, state: str, exit_code: int, error: str | None) -> int:
        """Record the final state; returns ``exit_code``."""
        from prefetch import jobs

        self.closed.set()
        if self.flusher is not None:
            self.flusher.join()
        with self.lock:
            snapshot = [replace(f) for f in self.files]
        self.final_state = state

        def end(rec) -> None:
            rec.files = snapshot
            rec.state = state
            rec.exit_code = exit_code
            rec.error = error or None
            rec.finished = time.time()

        if self.spare is not None:
            self.spare.release()
        try:
            jobs.update_record(self.job_id, end, self.env)
        except (LocalFileError, OSError) as exc:  # its disk refuses even that: said once, not a crash of the worker
            self.log_line(f"job {self.job_id} could not record its end ({state}, exit {exit_code}): {exc}")
        return exit_code

    def apply_results(self, results, *, cancelled: bool) -> None:
        """Per-file final states from ``run_request``'s results."""
        with self.lock:
            for r in results:
                f = self._file(r.name)
                if f is None:
                    continue
                f.rate, f.eta = 0.0, None
                if _failed(r):
                    f.exit_code = r.exit_code or int(ExitCode.FAILURE)
                    f.error = r.error
                    if f.exit_code == int(ExitCode.INTERRUPTED):
                        f.state = "cancelled" if cancelled else "interrupted"
                    else:
                        f.state = "failed"
                else:
                    f.state = "done" if r.status == "downloaded" else "cached"
                    f.exit_code = 0
                    f.error = None
                    f.bytes = r.size
                    f.total = r.size
            self.dirty = True

    def _file(self, name: str):
        candidates = self.by_name.get(name) or []
        for f in candidates:
            if f.state not in ("done", "cached", "failed"):
                return f
        return candidates[0] if candidates else None

    # -- events ------------------------------------------------------------------
    def __call__(self, event) -> None:
        from prefetch.model.events import EventKind

        with self.lock:
            f = self._file(event.file)
            if f is not None:
                kind = event.kind
                if kind in (EventKind.START, EventKind.PROGRESS):
                    f.state = "downloading"
                    f.bytes, f.total = event.done, event.total
                    f.rate, f.eta = event.rate, event.eta
                elif kind is EventKind.NOTE and event.message.startswith("waiting for"):
                    f.state = "waiting"
                elif kind is EventKind.VERIFY:
                    f.state = "verified"
                    f.bytes, f.total, f.rate, f.eta = event.done, event.total, 0.0, None
                elif kind is EventKind.EXTRACT:
                    f.state = "extracting"
                elif kind in (EventKind.DONE, EventKind.CACHED):
                    f.state = "done" if kind is EventKind.DONE else "cached"
                    f.bytes, f.total, f.rate, f.eta = event.done, event.total, 0.0, None
                    f.exit_code, f.error = 0, None
                elif kind is EventKind.FAILED:
                    f.exit_code = event.exit_code or int(ExitCode.FAILURE)
                    f.error = event.message
                    f.state = "interrupted" if f.exit_code == int(ExitCode.INTERRUPTED) else "failed"
                    f.rate, f.eta = 0.0, None
                self.dirty = True
        # A file stopped by `prefetch cancel` (SIGTERM) is "cancelled" in the log, not "failed exit=7".
        self.renderer.stopped_word = "cancelled" if self.signalled else "interrupted"
        self.renderer(event)
        self._maybe_pause(event)

    def log_line(self, text: str) -> None:
        """A job-level line in the log, in the same shape as event lines."""
        from prefetch.ui.render import timestamp

        with self.renderer.lock:  # the renderer writes event lines to the same stream
            self.log.write(f"{timestamp()} {' '.join(text.split())}\n")
            self.log.flush()

    def _maybe_pause(self, event) -> None:
        # Test hook (see the module docstring).
        if self.pause_at is None or event.kind.value != self.pause_at:
            return
        count = self.seen.get(self.pause_at, 0) + 1
        self.seen[self.pause_at] = count
        if count != self.pause_count:
            return
        self.flush(force=True)
        seconds = float(self.env.get("PREFETCH_TEST_PAUSE_SECONDS", "60"))
        self.log_line(f"{event.file} note test hook: pausing at {self.pause_at} for {seconds:g}s")
        self.stop.wait(seconds)


def _pause_hook(env: Mapping[str, str]) -> tuple[str | None, int]:
    value = env.get("PREFETCH_TEST_PAUSE_AT", "").strip().lower()
    if not value:
        return None, 0
    kind, _, count = value.partition(":")
    return kind, int(count) if count.isdigit() else 1


if __name__ == "__main__":
    from prefetch.jobs.out_of_files import exit_worker

    exit_worker(main())
