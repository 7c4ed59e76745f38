"""prefetch: background, resumable, verified dataset downloads into the Keras cache.

Public API: ``ensure()``, ``wait()``, ``status()`` (see ``prefetch.api``) and
the error classes in ``prefetch.errors``. Importing ``prefetch`` stays light:
the API functions import their machinery when first called.
"""

from prefetch.errors import (
    ExitCode,
    HashMismatchError,
    IntegrityError,
    InterruptedTransferError,
    JobNotFoundError,
    LocalFileError,
    NetworkError,
    PrefetchError,
    UnknownDatasetError,
    UnsafeArchiveError,
    UsageError,
    WaitTimeoutError,
)


def ensure(names, background=False, **options):
    """Make datasets present, verified and in place; ``background=True`` returns a job at once.

    See ``prefetch.api.ensure``.
    """
    from prefetch.api import ensure as _ensure

    return _ensure(names, background=background, **options)


def wait(names_or_jobs=None, timeout=None):
    """Block until jobs or datasets are done; raise the failure's error class.

    See ``prefetch.api.wait``.
    """
    from prefetch.api import wait as _wait

    return _wait(names_or_jobs, timeout=timeout)


def status(job=None):
    """Background jobs and their per-file progress (``JobRecord`` dataclasses).

    See ``prefetch.api.status``.
    """
    from prefetch.api import status as _status

    return _status(job)


__all__ = [
    "ExitCode",
    "HashMismatchError",
    "IntegrityError",
    "InterruptedTransferError",
    "JobNotFoundError",
    "LocalFileError",
    "NetworkError",
    "PrefetchError",
    "UnknownDatasetError",
    "UnsafeArchiveError",
    "UsageError",
    "WaitTimeoutError",
    "ensure",
    "status",
    "wait",
]
