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
from pathlib import Path
from typing import TextIO

from prefetch.errors import ExitCode
from prefetch.fs.files import remove_dead_temps
from prefetch.jobs.job_progress import JobProgress, failed_result

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
    from prefetch.jobs.log_file import JobLog, open_log

    fd = open_log(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)  # never through a planted link; 0600

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
        error = "; ".join(r.error or "" for r in results if failed_result(r) and r.exit_code == code)
    progress.apply_results(results, cancelled=bool(signalled))
    return progress.finish(state=state, exit_code=code, error=error)


if __name__ == "__main__":
    from prefetch.jobs.out_of_files import exit_worker

    exit_worker(main())
