"""Checksums: md5/sha256 chosen by hash length (as Keras does), incremental hashing."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from prefetch.errors import HashMismatchError
from prefetch.model.specs import ExpectedHash

CHUNK = 1 << 20



def new_hasher(algorithm: str):
    """Return a fresh hashlib object for ``algorithm``."""
    if algorithm == "md5":
        # Not for security: Keras publishes md5 for some files; sha256 is preferred.
        return hashlib.md5(usedforsecurity=False)
    return hashlib.new(algorithm)


def hash_file(path: Path | str, algorithm: str = "sha256", *, length: int | None = None) -> str:
    """Return the hex digest of ``path`` (or of its first ``length`` bytes)."""
    hasher = new_hasher(algorithm)
    update_from_file(hasher, path, 0, length)
    return hasher.hexdigest()


def update_from_file(hasher, path: Path | str, start: int, end: int | None) -> int:
    """Feed bytes ``[start, end)`` of ``path`` to ``hasher``; return bytes read."""
    done = 0
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    from prefetch.fs.safefs import open_readable

    fd = open_readable(path)  # never blocks on a FIFO; regular files only
    try:
        pos = start
        while end is None or pos < end:
            want = CHUNK if end is None else min(CHUNK, end - pos)
            n = os.preadv(fd, [view[:want]], pos)
            if n <= 0:
                break
            hasher.update(view[:n])
            pos += n
            done += n
    finally:
        os.close(fd)
    return done


def check_hash(got_hexdigest: str, expected: ExpectedHash, *, what: str) -> None:
    """Raise ``HashMismatchError`` unless the digests match.

    Args:
        what: the file, as the user knows it (dataset file name or path).
    """
    if not expected.matches(got_hexdigest):
        raise HashMismatchError(
            f"{what}: {expected.algorithm} mismatch: expected {expected.hexdigest}, got "
            f"{got_hexdigest}; the download was discarded. Check the hash, or the mirror, "
            f"and run the command again"
        )


def verify_file(path: Path | str, expected: ExpectedHash) -> None:
    """Hash ``path`` and compare with ``expected``.

    Raises:
        HashMismatchError: the file's digest differs.
    """
    check_hash(hash_file(path, expected.algorithm), expected, what=str(path))
