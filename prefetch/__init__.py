"""prefetch: background, resumable, verified dataset downloads into the Keras cache.

Public API: ``ensure()``, ``wait()``, ``status()``, ``watch()`` (see ``prefetch.api``) and
the error classes in ``prefetch.errors``. Importing ``prefetch`` stays light:
``prefetch.api`` imports its machinery when a function is first called.
"""

from prefetch.api import ensure, status, wait, watch
from prefetch.errors import (
    ExitCode,
    HashMismatchError,
    IntegrityError,
    InterruptedTransferError,
    JobNotFoundError,
    LocalFileError,
    NetworkError,
    NotDownloadedError,
    PrefetchError,
    UnknownDatasetError,
    UnsafeArchiveError,
    UsageError,
    WaitTimeoutError,
)

__all__ = [
    "ExitCode",
    "HashMismatchError",
    "IntegrityError",
    "InterruptedTransferError",
    "JobNotFoundError",
    "LocalFileError",
    "NetworkError",
    "NotDownloadedError",
    "PrefetchError",
    "UnknownDatasetError",
    "UnsafeArchiveError",
    "UsageError",
    "WaitTimeoutError",
    "ensure",
    "status",
    "wait",
    "watch",
]
