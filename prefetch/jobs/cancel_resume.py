"""Cancelling and resuming a job: stop its worker cleanly, or start a new one for it.

Nothing here prints.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from prefetch.errors import ExitCode, UsageError, WaitTimeoutError
from prefetch.fs.processes import process_start_time
from prefetch.jobs.launch import _launch
from prefetch.jobs.liveness import get_job, refresh_state, worker_identity_proven
from prefetch.jobs.record_types import JobRecord, JobState
from prefetch.jobs.records import check_timeout, record_path, this_host, update_record


def cancel_job(job_id: str, *, timeout: float = 30.0, env: Mapping[str, str] | None = None) -> JobRecord:
    """Ask a running job to stop (SIGTERM) and wait until it has saved its state.

    Returns the record; a job that is not running is returned unchanged.

    Raises:
        JobNotFoundError, UsageError: unknown or invalid id.
        WaitTimeoutError: the worker did not stop within ``timeout`` seconds.
    """
    import signal

    check_timeout(timeout)
    record = get_job(job_id, env)
    if not record.active:
        return record

    def ask(rec: JobRecord) -> None:
        rec.cancel_requested = True
        if rec.pid is None:  # the worker has not started yet: it will see this and stop
            rec.state = JobState.CANCELLED.value
            rec.exit_code = int(ExitCode.INTERRUPTED)
            rec.finished = time.time()

    record = update_record(job_id, ask, env)
    if worker_identity_proven(record, env):  # never a bare pid: it may belong to another process now
        try:
            os.kill(record.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while True:
        record = get_job(job_id, env)
        if not record.active:
            return record
        if time.monotonic() >= deadline:
            raise WaitTimeoutError(
                f"job {job_id} (pid {record.pid}) did not stop within {timeout:.0f}s after SIGTERM; "
                f"it may be finishing an extraction. Check `prefetch status {job_id}`"
            )
        time.sleep(0.1)


def resume_job(job_id: str, *, env: Mapping[str, str] | None = None, python: str | None = None) -> JobRecord:
    """Start a new worker for a stopped job; it reuses the bytes already on disk.

    Raises:
        JobNotFoundError, UsageError: unknown id, corrupt record, or still running.
    """
    from prefetch.flow.request import GetRequest
    from prefetch.flow.planning import plan_request

    env = dict(os.environ if env is None else env)
    record = get_job(job_id, env)
    if record.state == JobState.CORRUPT.value:
        _check_own_record(job_id, env)  # (another account's state dir: its records are 0600 now)
        raise UsageError(f"cannot resume {job_id}: {record.error}; start again with `prefetch get NAME -b`")
    if record.active:
        if record.pid is None:  # being started right now (a resume of another process, or `get -b`)
            raise _already_started(job_id, env, by_resume=record.attempts > 0)
        raise UsageError(
            f"job {job_id} is still {record.state} (pid {record.pid}); "
            f"`prefetch wait {job_id}`, or `prefetch cancel {job_id}` first"
        )
    request = GetRequest.from_dict(record.request)
    request.job = job_id
    from prefetch.jobs.job_proxies import pin_proxies, resume_environment

    own = pin_proxies(env)  # this shell's proxy: the job's from now on (jobs/job_proxies.py)
    env = resume_environment(job_id, request.proxies, env)  # else the job's own (the cell that started it)
    plans, _ = plan_request(request, env=env)  # the registry may have changed since: fail now, not in the worker
    from prefetch.jobs.targets import check_targets_writable

    check_targets_writable(plans)  # (a folder made read-only since: said now)

    def reset(rec: JobRecord) -> None:
        # Again under the jobs lock: another resume may have started a worker since the check
        # above (its record reset here would name our worker, which finds the run lock taken).
        if refresh_state(rec).active:
            raise _AlreadyStarted()
        rec.state = JobState.QUEUED.value
        rec.pid = None
        rec.pid_start = None
        rec.launcher, rec.launcher_start = os.getpid(), process_start_time(os.getpid())
        rec.host = this_host()
        rec.exit_code = None
        rec.error = None
        rec.finished = None
        rec.cancel_requested = False
        rec.attempts += 1
        if own and own != rec.request.get("proxies"):
            rec.request = {**rec.request, "proxies": own}
        for f in rec.files:
            if f.state not in ("done", "cached"):
                f.state = "pending"
                f.rate = 0.0
                f.eta = None
                f.exit_code = None
                f.error = None

    try:
        record = update_record(job_id, reset, env)
    except _AlreadyStarted:
        raise _already_started(job_id, env, by_resume=True) from None

    return _launch(record, env=env, python=python, note=f"resumed (attempt {record.attempts})")


class _AlreadyStarted(Exception):
    """(Inside ``resume_job``'s reset: another process started the job since it was read.)"""


def _already_started(job_id: str, env: Mapping[str, str], *, by_resume: bool, wait: float = 5.0) -> UsageError:
    """The refusal of a resume that lost the race to another start of the job: what is true of it.

    The winner resets the record to ``queued`` without a pid, then writes its worker's pid a few
    milliseconds later; the loser waits (up to ``wait`` seconds) for that pid, so that it names
    the worker rather than "pid None".
    """
    by = "another resume" if by_resume else "its `prefetch get -b`"
    deadline = time.monotonic() + wait
    record = get_job(job_id, env)
    while record.active and record.pid is None and time.monotonic() < deadline:
        time.sleep(0.05)
        record = get_job(job_id, env)
    if not record.active:
        return UsageError(f"job {job_id} was started by {by} meanwhile and is {record.state} already; "
                          f"`prefetch status {job_id}`")
    if record.pid is None:
        return UsageError(f"job {job_id} is being started by {by} (no worker pid yet); "
                          f"`prefetch wait {job_id}` follows it")
    return UsageError(f"job {job_id} is already {record.state} again (pid {record.pid}): {by} started it; "
                      f"`prefetch wait {job_id}` follows it")


def _check_own_record(job_id: str, env: Mapping[str, str]) -> None:
    """A job record of another account (unreadable to us: written 0600) is that account's state
    dir, not a corrupt record: the one line names PREFETCH_HOME (exit 5), as writing there would.

    Raises:
        LocalFileError: the record is another user's.
    """
    import errno

    from prefetch.fs.files import local_error

    path = record_path(job_id, env)
    try:
        owner = os.lstat(path).st_uid
    except OSError:
        return
    if owner != os.geteuid():
        raise local_error(PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path)), path,
                          instead="PREFETCH_HOME")

