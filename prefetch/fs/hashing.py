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
from typing import Mapping

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


_BUILTIN: dict = {}  # name -> the builtin hash's constructor, found once (a `from` import costs 2-5 us a call)


def _builtin(name: str):
    """``_sha1.sha1`` / ``_blake2.blake2b``, else hashlib's (a Python built without its own hashes)."""
    found = _BUILTIN.get(name)
    if found is None:
        try:
            found = getattr(__import__({"sha1": "_sha1", "blake2b": "_blake2"}[name]), name)
        except ImportError:
            import hashlib

            found = getattr(hashlib, name)
        _BUILTIN[name] = found
    return found


def sha1(data: bytes):
    """``hashlib.sha1(data)``: the builtin ``_sha1`` where this Python has it (no OpenSSL)."""
    return (_BUILTIN.get("sha1") or _builtin("sha1"))(data)


def blake2b(data: bytes, *, digest_size: int):
    """``hashlib.blake2b(data, digest_size=...)``, which is ``_blake2``'s (hashlib never takes OpenSSL's)."""
    return (_BUILTIN.get("blake2b") or _builtin("blake2b"))(data, digest_size=digest_size)


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


def first_mismatch(path: Path | str, hashes: tuple[ExpectedHash, ...]) -> tuple[ExpectedHash, str] | None:
    """The first of ``hashes`` (a file's every hash: ``FileSpec.hashes``) the file at ``path`` does
    not match, with the digest it has; None when it matches them all (one read of the file per hash).
    Every place that checks a file on disk against its hashes checks them all through this."""
    return digest_mismatch({}, hashes, path=path)


def digest_mismatch(digests: Mapping[str, str], hashes: tuple[ExpectedHash, ...], *,
                    path: Path | str | None = None) -> tuple[ExpectedHash, str] | None:
    """The first of ``hashes`` that the known ``digests`` (algorithm -> hex: a store object's
    metadata, a file hashed once in both algorithms) contradict, with the digest given; None when
    none does. An algorithm ``digests`` lacks is hashed from ``path``, or, without one, not judged."""
    for expected in hashes:
        got = digests.get(expected.algorithm)
        if got is None and path is not None:
            got = hash_file(path, expected.algorithm)
        if got is not None and not expected.matches(got):
            return expected, got
    return None


def bytes_match(data: bytes, hashes: tuple[ExpectedHash, ...]) -> bool:
    """Whether ``data`` matches every one of ``hashes``."""
    for expected in hashes:
        hasher = new_hasher(expected.algorithm)
        hasher.update(data)
        if not expected.matches(hasher.hexdigest()):
            return False
    return True


def verify_file(path: Path | str, expected: ExpectedHash) -> None:
    """Hash ``path`` and compare with ``expected``.

    Raises:
        HashMismatchError: the file's digest differs.
    """
    check_hash(hash_file(path, expected.algorithm), expected, what=str(path))
