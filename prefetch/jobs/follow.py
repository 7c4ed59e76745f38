"""Following a running job: each of its files reported once, as soon as the record says it is final.

``prefetch.as_completed(job=...)`` hands a background job's files to a training
loop as they are placed. The worker rewrites the job record about once a second;
this polls it (``get_job``, which also notices a worker that died) and turns every
file that reached a final state into a ``FileResult``. Following is read-only: it
never stops or slows the job (the job downloads at its own pace).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping

from prefetch.errors import ExitCode
from prefetch.jobs.liveness import get_job
from prefetch.jobs.record_types import ACTIVE_STATES, FINAL_FILE_STATES, FileStatus
from prefetch.model.plans import FileResult


def follow_job(
    job_id: str,
    *,
    on_file_done: Callable[[int, FileResult], None],
    stop: threading.Event,
    interval: float = 0.5,
    env: Mapping[str, str] | None = None,
) -> str:
    """Call ``on_file_done(index, result)`` once per file of the job as it ends; the job's final state.

    Returns when the job is no longer running (files it never finished are
    reported ``interrupted``; ``failed`` when the job failed as a whole or its record
    turned corrupt) or when ``stop`` is set (then ``"following stopped"``).

    Raises:
        JobNotFoundError, UsageError: unknown or invalid job id.
    """
    reported: set[int] = set()
    known: list[FileStatus] = []  # the files of the last record that listed them
    while True:
        record = get_job(job_id, env)
        running = record.state in ACTIVE_STATES
        # A record that cannot be read (corrupt) lists no files: the ones known so far end with it.
        files = record.files if len(record.files) >= len(known) else [*record.files, *known[len(record.files):]]
        known = files
        for index, status in enumerate(files):
            if index in reported:
                continue
            if status.state in FINAL_FILE_STATES or not running:
                reported.add(index)
                on_file_done(index, file_result(status, job_state=record.state, job_error=record.error,
                                                 job_exit_code=record.exit_code))
        if not running:
            return record.state
        if stop.wait(interval):
            return "following stopped"


def file_result(status: FileStatus, *, job_state: str = "done", job_error: str | None = None,
                job_exit_code: int | None = None) -> FileResult:
    """A job record's file as the ``FileResult`` a foreground run would have given."""
    result = FileResult(dataset=status.dataset, name=status.name, path=status.path, paths=[status.path],
                        size=status.bytes)
    if status.state in ("done", "cached"):
        result.status = "downloaded" if status.state == "done" else "cached"
        if status.path and not os.path.lexists(status.path):  # removed since the job placed it
            result.status, result.exit_code = "failed", int(ExitCode.FAILURE)
            result.error = (f"{status.name}: the job placed it at {status.path}, but it is no longer there "
                            f"(removed since); get it again")
        return result
    if status.state == "failed":
        result.status = "failed"
        result.exit_code = status.exit_code or int(ExitCode.FAILURE)
        result.error = status.error or f"{status.name}: failed in the job"
        return result
    # interrupted or cancelled, or never finished by a job that ended (its worker died, a job-level failure)
    result.status = "interrupted"
    result.exit_code = status.exit_code or int(ExitCode.INTERRUPTED)
    result.error = status.error or job_error or f"{status.name}: the job ended ({job_state}) before this file was placed"
    failed_whole = job_state in ("failed", "corrupt") and job_exit_code not in (None, int(ExitCode.INTERRUPTED))
    if status.exit_code is None and failed_whole:  # the job failed as a whole, or its record cannot be read
        result.status, result.exit_code = "failed", int(job_exit_code)
    return result
