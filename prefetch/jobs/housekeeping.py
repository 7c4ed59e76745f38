"""Job housekeeping: forget finished jobs, read (and follow) a job's log."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from prefetch.jobs.liveness import get_job, list_jobs
from prefetch.jobs.record_types import JobState, files_in_place
from prefetch.jobs.records import jobs_dir, locked_jobs


@dataclass
class CleanResult:
    """What ``clean_jobs`` removed and kept."""

    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


# -- clean ---------------------------------------------------------------------------
def clean_jobs(*, include_interrupted: bool = False, env: Mapping[str, str] | None = None) -> CleanResult:
    """Forget finished jobs: remove their records and logs.

    Removes done, failed, cancelled and corrupt jobs, and interrupted ones whose
    files are all in place anyway; every interrupted one with
    ``include_interrupted`` (they could still be resumed). Running jobs are kept.
    """
    result = CleanResult()
    directory = jobs_dir(env)
    if not directory.is_dir():
        return result
    removable = {JobState.DONE.value, JobState.FAILED.value, JobState.CANCELLED.value, JobState.CORRUPT.value}
    if include_interrupted:
        removable.add(JobState.INTERRUPTED.value)
    with locked_jobs(env):
        for record in list_jobs(env):
            finished_anyway = record.state == JobState.INTERRUPTED.value and files_in_place(record)
            if record.state in removable or finished_anyway:
                for path in (directory / f"{record.id}.json", directory / f"{record.id}.log",
                             directory / f"{record.id}.run"):
                    try:
                        path.unlink()
                    except FileNotFoundError:
                        pass
                result.removed.append(record.id)
            else:
                result.kept.append(record.id)
        # Records are only written under this lock, so a temp file here is one
        # left by a writer killed mid-write.
        for tmp in directory.glob(".*.tmp"):
            try:
                tmp.unlink()
            except OSError:
                pass
    return result


# -- logs ----------------------------------------------------------------------------
def iter_log(
    job_id: str,
    *,
    follow: bool = False,
    poll: float = 0.25,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """The text of a job's log in chunks; with ``follow``, keep reading until the job ends.

    Raises:
        UnsafePathError: the log is not a regular file (a FIFO, a device, a link planted in
            a shared state dir): never opened, so never waited on or read without end.
    """
    import os

    from prefetch.jobs.log_file import open_log

    record = get_job(job_id, env)
    path = record.log_path if record.log else jobs_dir(env) / f"{job_id}.log"
    position = 0
    pending = b""
    while True:
        finished = not follow or not get_job(job_id, env).active
        try:
            with os.fdopen(open_log(path, os.O_RDONLY, own=False), "rb") as fh:  # (an earlier 0644 one made 0600)
                fh.seek(position)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        if data:
            position += len(data)
            data = pending + data
            # Hand out whole lines only, so a reader never sees half a line.
            cut = data.rfind(b"\n") + 1
            if finished:
                cut = len(data)
            pending = data[cut:]
            if cut:
                yield data[:cut].decode("utf-8", errors="replace")
        elif finished and pending:
            yield pending.decode("utf-8", errors="replace")
            pending = b""
        if finished:
            return
        time.sleep(poll)
