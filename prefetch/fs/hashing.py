"""Checksums: md5/sha256 chosen by hash length (as Keras does), incremental hashing.

``hashlib`` is imported where a file is hashed, not at start-up: its import loads OpenSSL's
library (``_hashlib``, ~2 ms of a process here), which a plain ``get`` without a hash never
needs. The names a ``get`` hashes anyway (a lock's key, a completion record's path) go
through :func:`sha1` and :func:`blake2b`: CPython's own builtin SHA-1 and BLAKE2, the same
digests as hashlib's, without OpenSSL.
"""

from __future__ import annotations

import os
from pathlib import Path

from prefetch.errors import HashMismatchError
from prefetch.model.specs import ExpectedHash

CHUNK = 1 << 20



def new_hasher(algorithm: str):
    """Return a fresh hashlib object for ``algorithm``."""
    import hashlib

    if algorithm == "md5":
        # Not for security: Keras publishes md5 for some files; sha256 is preferred.
        return hashlib.md5(usedforsecurity=False)
    return hashlib.new(algorithm)


def sha1(data: bytes):
    """``hashlib.sha1(data)``: the builtin ``_sha1`` where this Python has it (no OpenSSL)."""
    try:
        from _sha1 import sha1 as builtin
    except ImportError:  # (a Python built without its own hashes)
        from hashlib import sha1 as builtin
    return builtin(data)


def blake2b(data: bytes, *, digest_size: int):
    """``hashlib.blake2b(data, digest_size=...)``, which is ``_blake2``'s (hashlib never takes OpenSSL's)."""
    try:
        from _blake2 import blake2b as builtin
    except ImportError:
        from hashlib import blake2b as builtin
    return builtin(data, digest_size=digest_size)


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
