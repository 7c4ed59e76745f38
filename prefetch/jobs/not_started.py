"""A ``-b`` job whose worker could not be started: the record says so at once.

The spawn refused (an environment too large to pass, no file descriptor left) or the job's log
could not be written (a full disk, a file size limit): the record becomes ``failed`` with the
reason and its exit code, not ``queued`` until liveness gives up on it a minute later. Where the
state dir refuses even that, the launcher's ``unlaunched()`` undoes a new job's record.
May import: errors, jobs.records, jobs.record_types.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from prefetch.jobs.record_types import JobRecord
from prefetch.jobs.records import update_record


def not_started(record: JobRecord, exc: Exception, env: Mapping[str, str], unlaunched: Callable[[], None] | None):
    """The error for a worker that could not be started, once the record says ``failed`` (or,
    where the state dir refuses that too, once ``unlaunched()`` has undone the record)."""
    import errno

    from prefetch.errors import OPEN_FILES_ERRNOS, ExitCode, PrefetchError, too_many_open_files

    if isinstance(exc, PrefetchError):
        error, why = exc, str(exc)
    elif isinstance(exc, OSError) and exc.errno in OPEN_FILES_ERRNOS:
        error = too_many_open_files(f"job {record.id} not started")
        why = str(error)
    else:
        why = f"{exc.__class__.__name__}: {exc}"
        if isinstance(exc, OSError):
            why = exc.strerror or str(exc)
            if exc.errno == errno.E2BIG:
                why += " (the environment passed to the worker is too large)"
        why = f"its worker could not be started: {why}; nothing was downloaded"
        error = PrefetchError(f"job {record.id} not started: {why}")

    def failed(rec: JobRecord) -> None:
        if rec.pid is None:  # (never a worker that did start: a resume's meanwhile)
            rec.state = "failed"
            rec.exit_code = int(getattr(error, "exit_code", ExitCode.FAILURE))
            rec.error = why
            rec.finished = time.time()
            for f in rec.files:
                if f.state not in ("done", "cached"):
                    f.state = "failed"

    try:
        update_record(record.id, failed, env)
    except Exception:  # noqa: BLE001 - the state dir refuses too: the error is still said
        if unlaunched is not None:
            try:
                unlaunched()
            except Exception:  # noqa: BLE001 - (not even that: the line says what went wrong first)
                pass
    return error
