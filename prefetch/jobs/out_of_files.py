"""The worker out of file descriptors (``ulimit -n`` low in the cell that ran ``get -b``; the
worker inherits it): a few descriptors held in reserve from its start are given back so the
job's record can still say the foreground's one line (``errors.too_many_open_files``, exit 5)
instead of the worker dying in its last resort (``import traceback`` needs a file) and the job
staying "running" until ``wait`` called it interrupted."""

from __future__ import annotations

import os
import sys
import time

from prefetch.errors import OPEN_FILES_ERRNOS, ExitCode, PrefetchError, too_many_open_files

SPARE_DESCRIPTORS = 3  # the jobs lock, the record read and its temp file, as update_record takes them


class SpareDescriptors:
    """Descriptors on /dev/null kept until the job's end is written (``release`` before that)."""

    def __init__(self, count: int = SPARE_DESCRIPTORS) -> None:
        self.fds: list[int] = []
        for _ in range(count):
            try:
                self.fds.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
            except OSError:  # (already at the limit: the job will say so)
                break

    def release(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


def out_of_files(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it was raised from) is EMFILE/ENFILE, the line made of it, or an
    extension module's ImportError for it (dlopen's message: no errno)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in OPEN_FILES_ERRNOS:
            return True
        if isinstance(exc, (PrefetchError, ImportError)) and "too many open files" in str(exc).lower():
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def record_out_of_files(job_id: str, env, spare: SpareDescriptors) -> int:
    """No descriptor left before the job could run (its record unread, the run lock or log not
    opened): the record says so with the spare descriptors, and the worker's exit code, 5."""
    spare.release()
    error = str(too_many_open_files())

    def end(rec) -> None:
        rec.state, rec.exit_code, rec.error, rec.finished = "failed", int(ExitCode.FILESYSTEM), error, time.time()

    try:
        from prefetch.jobs.records import update_record

        update_record(job_id, end, env)
    except (OSError, ValueError, PrefetchError):  # (not even that: the record as it was is all there is)
        pass
    print(f"prefetch worker: {error}", file=sys.stderr)
    return int(ExitCode.FILESYSTEM)


def finish_out_of_files(progress, job_id: str) -> int:
    """The job's end when EMFILE reached the worker's last resort: its log and record say the line."""
    line = str(too_many_open_files())
    progress.log_line(f"job {job_id} failed: {line}")
    return progress.finish(state="failed", exit_code=int(ExitCode.FILESYSTEM), error=line)


def exit_worker(code: int) -> None:
    """The worker's exit: without the interpreter's finalisation (``errors.end_process``: a
    daemon thread still inside OpenSSL, or after EMFILE the unwinder a daemon thread's exit
    would load, ends the process otherwise with a signal)."""
    from prefetch.errors import end_process

    end_process(code)
    sys.exit(code)
