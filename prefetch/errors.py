"""Errors the user can act on, each with its documented exit code.

The CLI turns a ``PrefetchError`` into one line on stderr and ``exit_code``.
Any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes; documented in docs/exit-codes.md (tests/test_docs12_reference.py holds it)."""

    OK = 0
    FAILURE = 1
    USAGE = 2
    NETWORK = 3
    INTEGRITY = 4
    FILESYSTEM = 5
    UNSAFE_ARCHIVE = 6
    INTERRUPTED = 7


class PrefetchError(Exception):
    """Base class: something went wrong that the user can understand and fix."""

    exit_code: ExitCode = ExitCode.FAILURE


# -- 2: usage ---------------------------------------------------------------
class UsageError(PrefetchError):
    """The command line or an input file is wrong."""

    exit_code = ExitCode.USAGE


class UnknownDatasetError(UsageError):
    """A dataset name that no registry knows."""


class BadHashError(UsageError):
    """A hash given by the user or a registry is not valid hex of a known length."""


class RegistryError(UsageError):
    """A registry file (built-in or user) is malformed."""


class MirrorCatalogError(UsageError):
    """mirrors.toml (built-in or user) is malformed or names an unknown mirror."""


class JobNotFoundError(UsageError):
    """No job with that id."""


# -- 3: network -------------------------------------------------------------
class NetworkError(PrefetchError):
    """The network failed and retries gave up (or the server said no for good)."""

    exit_code = ExitCode.NETWORK


class HTTPStatusError(NetworkError):
    """A final HTTP error such as 404 or 403."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


# -- 4: integrity -----------------------------------------------------------
class IntegrityError(PrefetchError):
    """The bytes are not the ones expected."""

    exit_code = ExitCode.INTEGRITY


class HashMismatchError(IntegrityError):
    """The downloaded file's hash differs from the expected one."""


class RemoteChangedError(IntegrityError):
    """The remote file kept changing while we downloaded it."""


# -- 5: local filesystem ----------------------------------------------------
class LocalFileError(PrefetchError):
    """The local filesystem refused: no space, no permission, not a directory."""

    exit_code = ExitCode.FILESYSTEM


class DiskFullError(LocalFileError):
    """Not enough free space for the file."""


OPEN_FILES_ERRNOS = (23, 24)  # ENFILE, EMFILE
OPEN_FILES_MET = [False]  # set by too_many_open_files: the process entry then ends without finalising


def end_process(code: int) -> None:
    """End the process with ``code`` now: the exit handlers run, the streams are flushed, and
    the interpreter's finalisation is skipped (the ``prefetch`` command and a job's worker).

    Returns, for the usual exit, when a thread Python would wait for is alive or a stream
    cannot be flushed; never after EMFILE (``too_many_open_files``), where a daemon thread
    stopped by the finalisation calls ``pthread_exit``, whose unwinder glibc loads then (a
    file to open: none left) and the process aborts (exit 134) after its line was said.

    Skipping the finalisation saves 20-30 ms of CPU, and more: a failed download can end while
    daemon threads are inside OpenSSL with the interpreter's lock let go (a preconnect's
    handshake, a CA bundle loading), and the usual exit frees what they use under them; the
    process died of SIGSEGV after its error line one run in five (exit -11, not 3).
    """
    import atexit
    import os
    import threading

    wait = not OPEN_FILES_MET[0]
    main_thread = threading.main_thread()
    if wait and any(t is not main_thread and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return  # Python joins it, as it always would
    atexit._run_exitfuncs()  # what they do at a normal exit (and they are not run twice)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:  # noqa: BLE001 - a closed or broken stream: the usual exit reports it
        if wait:
            return
    os._exit(code)


def too_many_open_files(what: str = "") -> LocalFileError:
    """The one line for EMFILE/ENFILE (the process may open no more files: ``ulimit -n``; or the
    system's table is full): the limit (when it can still be read) and how to raise it.

    Imports nothing that needs a file (a module not loaded yet cannot be opened then either).
    """
    OPEN_FILES_MET[0] = True
    limit = ""
    try:
        import os  # (loaded at start-up; ``resource`` is a module that would need a file of its own)

        limit = f" (ulimit -n is {os.sysconf('SC_OPEN_MAX')})"  # (getrlimit's soft limit)
    except (ValueError, OSError):  # the limit is a detail; the advice stands without it
        pass
    where = f"{what}: " if what else ""
    return LocalFileError(
        f"{where}too many open files{limit}; raise the limit (`ulimit -n 4096` in the shell or cell that "
        f"runs prefetch) and run the command again to resume"
    )


class UnsafePathError(LocalFileError):
    """A prefetch path holds a link, FIFO, device or another user's file that prefetch did not create."""


# -- 6: unsafe archive ------------------------------------------------------
class UnsafeArchiveError(PrefetchError):
    """An archive tried to write outside its target, or is a decompression bomb."""

    exit_code = ExitCode.UNSAFE_ARCHIVE


# -- 7: interrupted ---------------------------------------------------------
class InterruptedTransferError(PrefetchError):
    """Cancelled or interrupted; what is on disk can be resumed."""

    exit_code = ExitCode.INTERRUPTED


# -- 1: other ---------------------------------------------------------------
class LockTimeoutError(PrefetchError):
    """Another process holds the file and did not finish in time."""


class WaitTimeoutError(PrefetchError):
    """``wait`` ran out of time before the jobs finished."""


class NotDownloadedError(PrefetchError):
    """A dataset is not in place and no job is fetching it."""


class MissingExtraError(PrefetchError):
    """An optional dependency is not installed (exit 1): the message says what to install."""


class StoreError(NetworkError):
    """The S3 team store refused or failed a request (exit 3)."""


_ERRORS: dict[int, type[PrefetchError]] = {
    int(ExitCode.USAGE): UsageError,
    int(ExitCode.NETWORK): NetworkError,
    int(ExitCode.INTEGRITY): IntegrityError,
    int(ExitCode.FILESYSTEM): LocalFileError,
    int(ExitCode.UNSAFE_ARCHIVE): UnsafeArchiveError,
    int(ExitCode.INTERRUPTED): InterruptedTransferError,
}


def error_for_exit_code(code: int, message: str) -> PrefetchError:
    """The ``PrefetchError`` subclass that goes with an exit code (base class for 1)."""
    return _ERRORS.get(int(code), PrefetchError)(message)
