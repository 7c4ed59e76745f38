"""The ``<final>.part`` being written: opened once, written at offsets, closed after the last writer.

Bytes land at their own offsets with ``pwrite`` from every worker's buffer; the space
is reserved up front when the size is known (a full disk shows at once, not at 90%).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from prefetch.fs.files import local_error


def open_part(part: Path) -> tuple[int, os.stat_result]:
    """Open (creating) the ``.part`` file for positional writes; its fd and its ``fstat``.

    Never through a link, never a FIFO or device, never another user's file (a shared
    cache dir): those raise ``UnsafePathError``.

    Raises:
        LocalFileError: it cannot be opened (UnsafePathError: it is not ours to write).
    """
    from prefetch.fs.safefs import open_file_stat

    try:
        return open_file_stat(part, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise local_error(exc, part) from None


def _write_rest(fd: int, data, pos: int, written: int) -> None:
    """``pwrite`` ``data[written:]`` at ``pos + written`` until all of it is on disk (OSError: the
    disk's refusal). A short write is never ignored: it would leave a hole in a range counted done."""
    view = memoryview(data)
    while written < len(view):
        n = os.pwrite(fd, view[written:], pos + written)
        if n <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written += n


class PartFile:
    """One open ``.part``. ``write_at`` needs no lock: the fd stays open until ``close``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.empty = False  # known to hold no byte (a new file, nothing written yet): truncate() has nothing to do
        self.ident: tuple[int, int] | None = None  # (st_dev, st_ino) of the file opened: the one to be placed
        self.high = 0  # the length the file has at least: its bytes written, its space reserved
        self.cut = ""  # another process cut it short: why every write is refused from then on

    def open(self) -> None:
        self.fd, st = open_part(self.path)
        self.empty = not st.st_size
        self.ident = (st.st_dev, st.st_ino)
        self.high = st.st_size

    def _check_length(self) -> None:
        """Before a write: the file is still as long as we made it. Another process that cut it
        (``truncate``, ``: > file.part``) dropped bytes counted done; the writes after the cut
        would grow it back to its size with zeros in their place, which no size check sees and,
        without a hash, nothing else. The file is emptied (its saved state then fits no more:
        the next run starts over) and the download fails: LocalFileError."""
        high = self.high
        if high or self.cut:
            length = os.fstat(self.fd).st_size
            if length < high or self.cut:
                from prefetch.errors import LocalFileError

                if not self.cut:  # (the other workers' writes after it are refused too: nothing grows it back)
                    self.cut = (f"{self.path} was truncated by another process during the download ({length} "
                                f"bytes left of {high}); not placed. Make sure nothing else writes there, then "
                                f"run the same command again")
                    os.ftruncate(self.fd, 0)
                raise LocalFileError(self.cut)

    def _wrote(self, end: int) -> None:
        """``end`` bytes are in the file now (only after the write: a write a full disk refused
        leaves the file as long as it was, which is no cut)."""
        if end > self.high:
            self.high = end

    def write_at(self, data, pos: int, *, needed=None) -> None:
        """Write ``data`` at offset ``pos`` (``needed()``: bytes still to come, for a disk-full message)."""
        self.empty = False
        try:
            self._check_length()
            written = os.pwrite(self.fd, data, pos)
            if written < len(data):  # a nearly full disk takes what fits; the rest, or its error, next
                _write_rest(self.fd, data, pos, written)
            self._wrote(pos + len(data))
        except OSError as exc:
            raise local_error(exc, self.path, needed=needed() if needed else None) from None

    def write_from_pipe(self, pipe, n: int, pos: int, *, needed=None) -> None:
        """Write the ``n`` bytes waiting in ``pipe`` (``net/splice.py``) at offset ``pos``.

        A filesystem that refuses ``splice`` gets them through a read and ``pwrite``.
        """
        from prefetch.net.splice import splice_out

        self.empty = False
        try:
            self._check_length()
            try:
                splice_out(pipe, self.fd, n, pos)
            except OSError as exc:
                if exc.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV) or not pipe.pending:
                    raise
                done = n - pipe.pending
                while pipe.pending:
                    data = os.read(pipe.r, pipe.pending)
                    pipe.pending -= len(data)
                    _write_rest(self.fd, data, pos + done, 0)
                    done += len(data)
            self._wrote(pos + n)
        except OSError as exc:
            raise local_error(exc, self.path, needed=needed() if needed else None) from None

    def truncate(self) -> None:
        """Empty it: the download starts over."""
        if self.empty:
            return  # (a new .part: a small file's ftruncate for nothing)
        self.high = 0
        try:
            os.ftruncate(self.fd, 0)
        except OSError as exc:
            raise local_error(exc, self.path) from None

    def preallocate(self, size: int, *, needed: int | None = None) -> None:
        """Reserve ``size`` bytes on disk; a full disk raises now (other failures are ignored)."""
        if not size or not hasattr(os, "posix_fallocate"):
            return
        self.empty = False
        try:
            os.posix_fallocate(self.fd, 0, size)
            self.high = max(self.high, size)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise local_error(exc, self.path, needed=needed) from None
            # EOPNOTSUPP / EINVAL on some filesystems: preallocation is only an optimisation.

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            if self.cut:  # (empty again after the last writer: a write under way at the cut grew it)
                try:
                    os.ftruncate(fd, 0)
                except OSError:
                    pass
            os.close(fd)
