"""Limits of one extraction: member count, bytes written, ratio, free space; a guarded tar stream."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from prefetch.archive.format import _DECOMPRESSION_ERRORS, _read_error
from prefetch.errors import DiskFullError, UnsafeArchiveError

RATIO_FLOOR = 1 << 20  # below this many bytes written the ratio limit is not applied
_TAR_OVERHEAD_PER_MEMBER = 8 << 10  # header, long-name/pax records and padding, generously
_TAR_OVERHEAD_FIXED = 1 << 20


@dataclass
class _Budget:
    """Counts members and bytes written, raising as soon as a limit is passed."""

    archive: Path
    archive_size: int
    max_bytes: int | None
    max_ratio: float
    max_members: int
    free_bytes: int
    free_where: Path
    written: int = 0
    holes: int = 0  # bytes of sparse-file holes: count against max_bytes and free space, not the ratio
    members: int = 0
    last_member: str = ""

    @property
    def ratio_bytes(self) -> int | None:
        if self.max_ratio == float("inf"):
            return None
        return max(int(self.max_ratio * self.archive_size), RATIO_FLOOR)

    def add_member(self, name: str) -> None:
        self.members += 1
        self.last_member = name
        self.check_members(self.members, name)

    def check_members(self, count: int, name: str) -> None:
        if count > self.max_members:
            raise UnsafeArchiveError(
                f"unsafe archive {self.archive}: it has more than {self.max_members} members "
                f"(reached at {name!r}); refusing it as a possible decompression bomb. Nothing was "
                "extracted; do not trust this source."
            )

    def check_declared(self, size: int, name: str) -> None:
        """Fail early if a header already announces too much (headers can lie low, not high)."""
        self._check(self.written + max(size, 0), name, how="would bring")

    def add_written(self, size: int, name: str) -> None:
        self.written += size
        self._check(self.written, name, how="brought")

    def add_holes(self, size: int, name: str) -> None:
        """A verified archive's sparse member: its holes count as bytes, but not for the ratio."""
        self.holes += max(size, 0)
        self._check(self.written, name, how="would bring")

    def data_limit(self) -> int:
        """The least of the byte limits (free space, ``max_bytes``, the ratio's)."""
        limits = [self.free_bytes]
        if self.max_bytes is not None:
            limits.append(self.max_bytes)
        if self.ratio_bytes is not None:
            limits.append(self.ratio_bytes)
        return min(limits)

    def stream_limit(self) -> int:
        return self.data_limit() + (self.members + 1) * _TAR_OVERHEAD_PER_MEMBER + _TAR_OVERHEAD_FIXED

    def _check(self, stored: int, name: str, *, how: str) -> None:
        total = stored + self.holes
        if self.max_bytes is not None and total > self.max_bytes:
            raise UnsafeArchiveError(
                f"unsafe archive {self.archive}: member {name!r} {how} the uncompressed total to "
                f"{total} bytes, over the limit of {self.max_bytes} bytes; refusing it as a possible "
                "decompression bomb. Nothing was extracted; do not trust this source."
            )
        ratio_bytes = self.ratio_bytes
        if ratio_bytes is not None and stored > ratio_bytes:
            raise UnsafeArchiveError(
                f"unsafe archive {self.archive}: member {name!r} {how} the uncompressed total to "
                f"{stored} bytes, more than {self.max_ratio:g} times the {self.archive_size}-byte "
                "archive; refusing it as a possible decompression bomb. Nothing was extracted; "
                "do not trust this source."
            )
        if total > self.free_bytes:
            raise DiskFullError(
                f"not enough free space to extract {self.archive}: member {name!r} {how} it to "
                f"{total} bytes but only {self.free_bytes} bytes were free at {self.free_where}. "
                "Nothing was extracted; free some space and retry."
            )


_CD_HEADER = 46  # a zip central directory entry's fixed part; its name, extra and comment follow


def check_zip_directory(fp, budget: _Budget) -> None:
    """Refuse a zip whose central directory lists more than ``budget.max_members`` entries
    before ``zipfile`` reads it: zipfile builds an object per entry, about 500 bytes of memory
    for 50 of archive, before a count can be checked (1.2 million entries of one byte, a 64 MB
    archive: 600 MB and 6 s to refuse it; a 640 MB one, 6 GB). The entries are counted as zipfile
    will read them (the directory's size, not the count the end record claims), a MiB at a
    time; a directory too small to hold more than the limit is not read. Anything malformed is
    left to zipfile to report."""
    import struct
    import zipfile

    end_record = getattr(zipfile, "_EndRecData", None)  # (CPython's reader of the end records)
    try:
        end = end_record(fp) if end_record is not None else None
    except (OSError, ValueError, struct.error, zipfile.BadZipFile):
        return
    if not end:
        return
    size = end[zipfile._ECD_SIZE]
    if size <= _CD_HEADER * budget.max_members:
        return  # (no more entries than the limit fit)
    start = end[zipfile._ECD_LOCATION] - size
    if end[zipfile._ECD_SIGNATURE] == zipfile.stringEndArchive64:
        start -= zipfile.sizeEndCentDir64 + zipfile.sizeEndCentDir64Locator
    if start < 0:
        return
    fp.seek(start)
    left, buf, at, count = size, b"", 0, 0
    while True:
        if left and len(buf) - at < _CD_HEADER + 3 * 0xFFFF:  # (a header and its longest tail in hand)
            chunk = fp.read(min(left, 1 << 20))
            if not chunk:
                return
            buf, at, left = buf[at:] + chunk, 0, left - len(chunk)
        if len(buf) - at < _CD_HEADER or buf[at:at + 4] != b"PK\x01\x02":
            return
        name_len, extra_len, comment_len = struct.unpack_from("<3H", buf, at + 28)
        count += 1
        if count > budget.max_members:
            name = buf[at + _CD_HEADER:at + _CD_HEADER + name_len].decode("utf-8", "replace")
            budget.check_members(count, name)
        at += _CD_HEADER + name_len + extra_len + comment_len


class _GuardedStream:
    """A decompressed tar stream that refuses to grow past the budget and reports corruption.

    Decompression errors become ``IntegrityError``; read errors of the file itself
    (which carry an errno) become ``LocalFileError``.
    """

    def __init__(self, inner, *, budget: _Budget, archive: Path) -> None:
        self._inner = inner
        self._budget = budget
        self._archive = archive
        self._pos = 0

    def _guard(self, end: int) -> None:
        limit = self._budget.stream_limit()
        if end > limit:
            last = self._budget.last_member
            where = f"the member after {last!r}" if last else "its first member"
            raise UnsafeArchiveError(
                f"unsafe archive {self._archive}: {where} would take its tar stream past {limit} "
                f"bytes while its members so far hold only {self._budget.written} (oversized "
                "headers or padding); refusing it as a possible decompression bomb. Nothing was "
                "extracted."
            )

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = max(self._budget.stream_limit() - self._pos, 0) + 1
        else:
            self._guard(self._pos + size)  # before reading: a huge pax header is never allocated
        try:
            data = self._inner.read(size)
        except _DECOMPRESSION_ERRORS as exc:
            raise _read_error(self._archive, exc) from exc
        self._pos += len(data)
        self._guard(self._pos)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            offset += self._pos
        elif whence != os.SEEK_SET:
            raise OSError(errno.ESPIPE, "only forward seeks are supported")
        self._guard(offset)
        try:
            self._pos = self._inner.seek(offset)
        except _DECOMPRESSION_ERRORS as exc:
            raise _read_error(self._archive, exc) from exc
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

