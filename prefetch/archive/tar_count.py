"""Counting a tar's members ahead of its extraction, to refuse one past the member limit early.

Extracting a member costs ~80 us (tarfile's header parsing, the stdlib's data filter, our
checks, the filesystem), so a tar of a million tiny members took ~80 s to reach the limit and be
refused (a million headers are 5 MB gzipped). :func:`count_members` walks the same stream's
headers alone, from the archive's own descriptor at its own offset (``os.pread``; the
extraction's reads are not disturbed), skipping each member's data as ``tarfile`` does, at a few
microseconds a header. It is run only when the extraction so far projects more than half the
limit (``worth_counting``), so an archive of ordinary members never pays for a second
decompression.

The walk follows ``tarfile``'s reading: pax (``x``, ``g``, Solaris ``X``) and GNU long-name (``L``, ``K``)
headers belong to the member after them, a pax ``size=`` (its records read by their lengths; a
global header's for each later pax-headed member) overrides the next header's size, data
follows regular files (and unknown types) only, and old-GNU sparse headers may have extension
blocks. Anything it does not understand (a bad checksum, a number it cannot read) makes it
return None: the extraction then goes on and counts as before. It is meant to count exactly
what tarfile yields (tests/test_mend14_tar_count.py compares the two), and a count past the limit
is the only thing acted on.

The walk passes no more members' data (and long-name, pax and sparse extension records) than
the extraction may write (``max_bytes``: ``_Budget.data_limit``, the least of the byte limits;
an old-GNU sparse member's extension blocks, each saying whether another follows, count
512 bytes each: a stream of them is a bomb too): a member whose declared
size takes the total past that ends it at once (None), unread (headers and padding between are
under 1 KiB a member counted). Without the bound, a .tar.bz2 of a thousand tiny members
(setting the count off) and then one member of terabytes of zeros (113 bytes of
bz2 per 100 MiB) was decompressed whole here (~190 MB/s: hours), while the extraction refuses
that member at once by its size (tests/test_review15_tar_bomb.py).
"""

from __future__ import annotations

import io
import os
import re

_BLOCK = 512
_DATA_TYPES_WITHOUT_DATA = frozenset(b"123456")  # hard link, symlink, char/block device, directory, FIFO
_RECORD = re.compile(rb"(\d+) ([^=]+)=")  # a pax record's start, as tarfile matches it


class _PositionalReader(io.RawIOBase):
    """The file behind ``fd`` from offset 0, read with ``os.pread`` (its shared offset untouched)."""

    def __init__(self, fd: int) -> None:
        self._fd, self._pos = fd, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = os.pread(self._fd, len(buffer), self._pos)
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)


def worth_counting(members: int, consumed: int, archive_size: int, max_members: int) -> bool:
    """Whether ``members`` extracted from ``consumed`` of ``archive_size`` archive bytes project
    (at the same rate) more than half of ``max_members`` for the whole archive."""
    return members * archive_size > (max_members // 2) * max(consumed, 1)


def count_members(fd: int, compression: str, *, limit: int, stop=None, max_bytes: int | None = None) -> int | None:
    """Members of the tar behind ``fd`` (whole, or up to one past ``limit``), or None when the
    walk cannot tell (see the module). ``stop()`` true: None at once. ``max_bytes``: None when the
    members' data passed would go past it (see the module)."""
    from prefetch.archive.format import _DECOMPRESSION_ERRORS, _open_decompressor

    raw = io.BufferedReader(_PositionalReader(fd), 1 << 20)
    stream = _open_decompressor(raw, compression)
    try:
        return _walk(stream, limit, stop, max_bytes)
    except (*_DECOMPRESSION_ERRORS, ValueError, _PastBound):
        return None
    finally:
        if stream is not raw:
            stream.close()


class _PastBound(Exception):
    """The walk would pass more than ``max_bytes`` of members' data."""


class _Blocks:
    """A stream read a MiB at a time and handed out in slices (a read call per 512-byte header
    cost more than the rest of the walk); ``charge``: data passed, up to ``max_bytes``."""

    def __init__(self, stream, max_bytes: int | None = None) -> None:
        self._stream, self._buf, self._at = stream, b"", 0
        self._left = max_bytes if max_bytes is not None else float("inf")  # (data that may still be skipped)

    def read(self, size: int) -> bytes:
        if self._at + size > len(self._buf):
            self._buf = self._buf[self._at:] + self._stream.read(max(size, 1 << 20))
            self._at = 0
        data = self._buf[self._at:self._at + size]
        self._at += len(data)
        return data

    def charge(self, size: int) -> None:
        """Count ``size`` more bytes of data (``_PastBound``: past ``max_bytes`` in all), before
        any of them is decompressed (a declared terabyte ends the walk at once)."""
        self._left -= size
        if self._left < 0:
            raise _PastBound

    def skip(self, size: int) -> bool:
        """Read past ``size`` bytes; False at the stream's end."""
        left = len(self._buf) - self._at
        if size <= left:
            self._at += size
            return True
        size -= left
        self._buf, self._at = b"", 0
        while size > 0:
            chunk = self._stream.read(min(size, 1 << 20))
            if not chunk:
                return False
            size -= len(chunk)
        return True


def _walk(stream, limit: int, stop, max_bytes: int | None = None) -> int | None:
    blocks = _Blocks(stream, max_bytes)
    count, size_override, global_size, last_good = 0, None, None, b""
    while True:
        header = blocks.read(_BLOCK)
        if len(header) < _BLOCK or not header.strip(b"\0"):
            return count  # (the end, or a truncated stream: the extraction reports that)
        if header != last_good:  # (the same header again, as a million "d/" are: checked once)
            if not _checksum_ok(header):
                return None
            last_good = header
        kind = header[156]
        size = _number(header[124:136])
        if size is None or size < 0:
            return None
        if kind in b"xgX":  # pax (and Solaris's "X", which tarfile reads as pax): a size= for the next member
            blocks.charge(size)  # (pax records one after another, each up to 64 MiB: data too)
            data = _read_exactly(blocks, size)
            if data is None or not blocks.skip(-size % _BLOCK):
                return None
            found = _pax_size(data)
            if kind == ord("g"):  # (tarfile keeps it for every later pax-headed member)
                global_size = found if found is not None else global_size
            elif size_override is None:  # (an outer one wins, as in tarfile)
                size_override = found if found is not None else global_size
            continue
        if kind in b"LK":  # a GNU long name or link name: the next header's
            blocks.charge(size)
            if not blocks.skip(size + -size % _BLOCK):
                return None
            continue
        count += 1
        if count > limit:
            return count
        if stop is not None and count & 1023 == 0 and stop():
            return None
        if kind == ord("S") and header[482]:  # old GNU sparse: extension blocks follow
            while True:
                blocks.charge(_BLOCK)  # (each says whether another follows: a stream of them is a bomb too)
                extension = blocks.read(_BLOCK)
                if len(extension) < _BLOCK:
                    return count
                if not extension[504]:
                    break
        if size_override is not None:
            size, size_override = size_override, None
            if size < 0:
                return None
        if kind in _DATA_TYPES_WITHOUT_DATA:
            continue  # (tarfile skips no data after these, whatever their size field says)
        blocks.charge(size)
        if not blocks.skip(size + -size % _BLOCK):
            return count


def _pax_size(data: bytes) -> int | None:
    """The ``size`` a pax header's records give (the last one), or None: read record by record,
    by each record's length, as tarfile reads them (a value's text is never a record: a comment
    holding a newline and ``1 size=0`` is a comment). A value tarfile cannot read as a number
    is 0, as in tarfile; a record of length 0 is ValueError (tarfile: an invalid header)."""
    size, pos = None, 0
    while (match := _RECORD.match(data, pos)) is not None:
        length = int(match.group(1))
        if length == 0:
            raise ValueError("a pax record of length 0")
        if match.group(2) == b"size":
            try:
                size = int(data[match.end(2) + 1:match.start(1) + length - 1].decode("utf-8", "surrogateescape"))
            except ValueError:
                size = 0
        pos += length
    return size


def _checksum_ok(header: bytes) -> bool:
    """tarfile's check: the sum of the header's bytes (its checksum field as spaces), unsigned or signed."""
    stored = _number(header[148:156])
    unsigned = sum(header) - sum(header[148:156]) + 8 * 32
    if stored == unsigned:
        return True
    high = sum(1 for b in header[:148] if b >= 128) + sum(1 for b in header[156:] if b >= 128)
    return stored == unsigned - 256 * high


def _number(field: bytes) -> int | None:
    """A header's number as tarfile's ``nti`` reads it (octal, or GNU base-256), None if unreadable."""
    if field[:1] in (b"\x80", b"\xff"):
        value = int.from_bytes(field[1:], "big")
        return value - (1 << (8 * (len(field) - 1))) if field[:1] == b"\xff" else value
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text or b"0", 8)
    except ValueError:
        return None


def _read_exactly(stream, size: int) -> bytes | None:
    if size > 64 << 20:
        return None  # (no pax header is this big; the extraction refuses it)
    data = stream.read(size)
    return data if len(data) == size else None
