"""prefetch: background, resumable, verified dataset downloads into the Keras cache.

Public API: ``ensure()``, ``wait()``, ``status()``, ``watch()`` (see ``prefetch.api``),
``get_file()`` (a drop-in for ``keras.utils.get_file``) and ``fetch()`` (in
``pooch.retrieve``'s spirit; see ``prefetch.dropins``), the cache housekeeping
``cache_usage()``, ``remove()`` and ``clean()`` (see ``prefetch.api``) and
the error classes in ``prefetch.errors``. Importing ``prefetch`` stays light: these
modules import their machinery when a function is first called.
"""

from prefetch.api import cache_usage, clean, ensure, remove, status, wait, watch
from prefetch.dropins import fetch, get_file
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
    "cache_usage",
    "clean",
    "ensure",
    "fetch",
    "get_file",
    "remove",
    "status",
    "wait",
    "watch",
]
