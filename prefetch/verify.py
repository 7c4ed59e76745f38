"""Checksums: md5/sha256 chosen by hash length (as Keras does), incremental hashing."""

from __future__ import annotations

import hashlib
import os
import string
from dataclasses import dataclass
from pathlib import Path

from prefetch.errors import BadHashError, HashMismatchError

_HEX = set(string.hexdigits)
_LENGTHS = {64: "sha256", 32: "md5"}
CHUNK = 1 << 20


@dataclass(frozen=True)
class ExpectedHash:
    """A hash the downloaded bytes must match."""

    algorithm: str  # "sha256" | "md5"
    hexdigest: str  # lower-case

    def __str__(self) -> str:
        return f"{self.algorithm}:{self.hexdigest}"


def parse_hash(text: str, *, algorithm: str = "auto") -> ExpectedHash:
    """Parse a hex digest, detecting the algorithm by length like Keras.

    Accepts ``HEX``, ``sha256:HEX`` or ``md5:HEX``.

    Raises:
        BadHashError: not hex, or a length that fits no supported algorithm.
    """
    value = text.strip().lower()
    if ":" in value:
        algorithm, _, value = value.partition(":")
    if not value or not set(value) <= _HEX:
        raise BadHashError(f"hash {text!r} is not hexadecimal; give 64 hex digits (sha256) or 32 (md5)")
    if algorithm == "auto":
        # Keras: 64 hex digits -> sha256, anything else -> md5.
        algorithm = "sha256" if len(value) == 64 else "md5"
    expected_len = {v: k for k, v in _LENGTHS.items()}.get(algorithm)
    if expected_len is None:
        raise BadHashError(f"unsupported hash algorithm {algorithm!r}; use sha256 or md5")
    if len(value) != expected_len:
        raise BadHashError(
            f"{algorithm} hash must be {expected_len} hex digits, got {len(value)} in {text!r}"
        )
    return ExpectedHash(algorithm, value)


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
    from prefetch.safefs import open_readable

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
    if got_hexdigest.lower() != expected.hexdigest:
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
