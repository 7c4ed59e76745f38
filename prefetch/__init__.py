"""prefetch: background, resumable, verified dataset downloads into the Keras cache.

Public API (filled as the library grows): ``ensure()``, ``wait()``, ``status()``
and the error classes in ``prefetch.errors``.
"""

from prefetch.errors import (  # noqa: F401
    ExitCode,
    HashMismatchError,
    IntegrityError,
    LocalFileError,
    NetworkError,
    PrefetchError,
    UnknownDatasetError,
    UnsafeArchiveError,
    UsageError,
)

__all__ = [
    "ExitCode",
    "HashMismatchError",
    "IntegrityError",
    "LocalFileError",
    "NetworkError",
    "PrefetchError",
    "UnknownDatasetError",
    "UnsafeArchiveError",
    "UsageError",
]
