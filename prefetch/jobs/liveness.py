"""Is a job's worker still there? Process identity, the run lock, and the verdict.

A record that says "running" is only believed while its worker provably runs:
the pid with the start time recorded beside it (``/proc/<pid>/stat``) and a command
line that is this job's worker (``/proc/<pid>/cmdline``), or, where
that is missing, the run lock (``jobs/<id>.run``) the worker holds. Otherwise the
job is ``interrupted`` (``cancelled`` when a cancel was asked for).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from prefetch.errors import ExitCode, PrefetchError
from prefetch.jobs.record_types import FINAL_FILE_STATES, JobRecord, JobState
from prefetch.jobs.records import (
    JOB_ID_RE,
    STALE_SECONDS,
    check_job_id,
    jobs_dir,
    load_record,
    record_path,
    this_host,
)
from prefetch.fs.processes import is_process_alive
from prefetch.errors import JobNotFoundError



def run_lock_path(job_id: str, env: Mapping[str, str] | None = None) -> Path:
    """``jobs/<id>.run``: the worker holds an exclusive ``flock`` on it while it runs."""
    return jobs_dir(env) / f"{check_job_id(job_id)}.run"


def hold_run_lock(job_id: str, env: Mapping[str, str] | None = None) -> int | None:
    """Take the job's run lock for this process's lifetime; its fd, or None if another holds it.

    The lock is the proof of identity where ``/proc`` (process start times) is missing:
    ``cancel`` signals a pid only while the lock is held.
    """
    import fcntl

    from prefetch.fs.safefs import open_file

    fd = open_file(run_lock_path(job_id, env), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def run_lock_held(job_id: str, env: Mapping[str, str] | None = None) -> bool | None:
    """True when a worker holds the job's run lock, False when not, None when there is no lock file."""
    import fcntl

    from prefetch.errors import UnsafePathError
    from prefetch.fs.safefs import open_file

    try:
        fd = open_file(run_lock_path(job_id, env), os.O_RDONLY, own=False)
    except (OSError, UnsafePathError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def _proc_available() -> bool:
    return Path("/proc/self/stat").exists()


def worker_identity_proven(record: JobRecord, env: Mapping[str, str] | None = None) -> bool:
    """Is ``record.pid`` provably this job's worker (so that signalling it is safe)?

    Proof is the process start time recorded with the pid, matched in /proc; where
    the record has none or /proc is missing, the run lock the worker holds. A bare
    pid is never enough: it may have been reused by an unrelated process.
    """
    if record.pid is None or (record.host and record.host != this_host()):
        return False
    if record.pid_start is not None and _proc_available():
        # The pid and its start time are what the record says: a planted record (a shared
        # state dir) or one from before a reboot may name a live process of ours that is no
        # worker. Its command line must be this job's worker too.
        return is_process_alive(record.pid, record.pid_start) and runs_worker_of(record.pid, record.id)
    return run_lock_held(record.id, env) is True


def runs_worker_of(pid: int, job_id: str) -> bool:
    """Whether ``pid``'s command line is ``... -m prefetch.jobs.worker JOB_ID`` (from /proc)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    try:
        at = args.index(b"prefetch.jobs.worker")
    except ValueError:
        return False
    return args[at + 1 : at + 2] == [job_id.encode()]


def refresh_state(record: JobRecord, *, now: float | None = None, mtime: float | None = None) -> JobRecord:
    """Return ``record`` with its state corrected when its worker is gone.

    A queued or running job whose worker process no longer exists becomes
    ``interrupted`` (or ``cancelled`` when a cancel was asked for); its files
    still in flight become ``interrupted`` too. For jobs on other hosts (a shared
    state dir) only a record not rewritten for ``STALE_SECONDS`` counts as gone: its
    ``updated`` time, or the record file's ``mtime`` (the file server's clock), whichever is
    later; a time further ahead of this clock than ``STALE_SECONDS`` (a skewed clock, a record
    edited by hand) is no sign of life, so such a job cannot look alive for ever.
    """
    if not record.active:
        return record
    now = time.time() if now is None else now
    if record.host and record.host != this_host():
        # Another machine sharing the state dir: its pids mean nothing here, but a
        # live worker rewrites its record at least every 20 s (job_progress.HEARTBEAT_SECONDS).
        signs = [t for t in (record.updated, mtime) if t is not None and t <= now + STALE_SECONDS]
        if signs and now - max(signs) < STALE_SECONDS:
            return record
        return _mark_stopped(record)
    if record.pid is None:
        # The launcher writes the pid right after starting the worker; a record without one
        # whose launcher is gone (or, where it is not recorded, for long) never got a worker.
        if record.launcher is not None and not is_process_alive(record.launcher, record.launcher_start):
            if run_lock_held(record.id) is True:  # (a worker started as its launcher died)
                return record
            return _never_started(record)
        if now - (record.updated or record.started) < 60:
            return record
        alive = False
    elif record.pid_start is not None and _proc_available():
        alive = is_process_alive(record.pid, record.pid_start) and runs_worker_of(record.pid, record.id)
    else:
        # No start time to tell a reused pid apart: the worker's run lock decides; a
        # just-launched worker may not hold it yet.
        held = run_lock_held(record.id)
        alive = held is True or (held is None and not _proc_available()
                                 and now - (record.updated or record.started) < 60 and is_process_alive(record.pid))
    if alive:
        return record
    return _mark_stopped(record)


def _never_started(record: JobRecord) -> JobRecord:
    record.error = record.error or (
        f"never started: the process that launched it (pid {record.launcher}) ended before starting "
        f"its worker; `prefetch resume {record.id}` starts it"
    )
    return _mark_stopped(record)


def _mark_stopped(record: JobRecord) -> JobRecord:
    state = JobState.CANCELLED if record.cancel_requested else JobState.INTERRUPTED
    record.state = state.value
    record.exit_code = int(ExitCode.INTERRUPTED)
    if not record.error:
        record.error = (
            f"the worker (pid {record.pid}) stopped without finishing; "
            f"`prefetch resume {record.id}` continues from the bytes on disk"
        )
    for f in record.files:
        if f.state not in FINAL_FILE_STATES:
            f.state = state.value
            f.rate = 0.0
            f.eta = None
    return record


def _corrupt_record(path: Path, message: str) -> JobRecord:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    log = path.with_suffix(".log")
    return JobRecord(
        id=path.stem,
        command="?",
        request={},
        state=JobState.CORRUPT.value,
        started=mtime,
        updated=mtime,
        error=message,
        log=str(log) if log.exists() else "",
        exit_code=int(ExitCode.FAILURE),
    )


# -- listing -------------------------------------------------------------------------
def get_job(job_id: str, env: Mapping[str, str] | None = None) -> JobRecord:
    """One job with its current state (a corrupt record comes back with state ``corrupt``).

    Raises:
        UsageError: bad id. JobNotFoundError: no such job.
    """
    try:
        record = load_record(job_id, env)
    except ValueError as exc:
        return _corrupt_record(record_path(job_id, env), str(exc))
    mtime = None
    if record.active and record.host and record.host != this_host():
        try:
            mtime = record_path(job_id, env).stat().st_mtime
        except OSError:
            pass
    was_active = record.active
    found = refresh_state(record, mtime=mtime)
    if was_active and not found.active:
        # Its worker is gone: it may have written its end between the read above and the look at
        # its process (a worker ends within a millisecond of its last record). Read once more:
        # `wait` said "interrupted (exit 7)" of a job that had failed with exit 5.
        try:
            again = load_record(job_id, env)
        except (ValueError, OSError, PrefetchError):
            return found
        if not again.active:
            return again
    return found


def reread_jobs(job_ids, last: dict, env: Mapping[str, str] | None = None) -> list[JobRecord]:
    """The jobs' current records (``last``: id -> record as last read, updated here).

    A finished job whose record was removed meanwhile (``prefetch clean`` in another
    shell forgets finished jobs) is given as last read, so a watch or wait of several
    jobs goes on.

    Raises:
        JobNotFoundError: a job never read, or running when last read, has no record.
    """
    for job_id in job_ids:
        try:
            last[job_id] = get_job(job_id, env)
        except JobNotFoundError:
            if job_id not in last or last[job_id].active:  # (a running job's record gone: no end to wait for)
                raise
    return [last[j] for j in job_ids]


def list_jobs(env: Mapping[str, str] | None = None) -> list[JobRecord]:
    """Every job with its current state, oldest first."""
    directory = jobs_dir(env)
    if not directory.is_dir():
        return []
    records = []
    for path in directory.glob("*.json"):
        if not JOB_ID_RE.match(path.stem):
            continue
        try:
            records.append(get_job(path.stem, env))
        except JobNotFoundError:
            continue  # removed meanwhile
    records.sort(key=lambda r: (r.started, r.id))
    return records


def latest_job(env: Mapping[str, str] | None = None) -> JobRecord | None:
    jobs = list_jobs(env)
    return jobs[-1] if jobs else None
