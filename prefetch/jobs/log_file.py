"""A job's log file: appended line by line, and a disk that refuses a line never stops the job.

The state dir often sits on a small root disk that something else fills (a ``pip install``
beside the job) while the data goes to another one: the download must go on. A line that
cannot be written is counted and dropped; the next line that can be written is preceded by
one saying how many were lost and why.

A log is its owner's alone (0600, as the job's record): its lines name every URL and path the job
fetches. ``open_log`` creates it so, and makes one an earlier version left 0644 private as it
opens it; ``keep_log_private`` does the same for a log no one opens (a finished job's, as
``status`` reads its record).
"""

from __future__ import annotations

import os
import time


class JobLog:
    """What the worker, its renderer and ``traceback`` write to: ``write``, ``flush``, ``close``."""

    encoding = "utf-8"

    def __init__(self, fd: int) -> None:
        self.fd = fd  # O_APPEND: each write lands at the end, whoever else appends
        self.lost = 0  # lines dropped since the last one written
        self.why = ""
        self.torn = False  # a line was cut short by the disk: the next write starts a new line

    def write(self, text: str) -> int:
        data = text.encode("utf-8", "surrogateescape")  # (a path not UTF-8: its bytes)
        if self.lost:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # (as the other lines begin)
            note = f"{stamp} log: {self.lost} line(s) before this one not written ({self.why})\n"
            data = (("\n" if self.torn else "") + note).encode() + data
        elif self.torn:
            data = b"\n" + data
        written = 0
        try:
            while written < len(data):
                written += os.write(self.fd, data[written:])
        except OSError as exc:
            self.lost += max(1, text.count("\n"))
            self.why = exc.strerror or str(exc)
            self.torn = self.torn or written > 0
            return len(text)
        self.lost, self.torn = 0, False
        return len(text)

    def flush(self) -> None:
        pass  # (nothing is buffered)

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return self.fd < 0

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)


def open_log(path, flags: int, *, own: bool = True) -> int:
    """A job's log opened never through a link (``safefs.open_file``), created 0600; one of ours
    that others may read (an earlier version's 0644) is made 0600.

    Raises:
        UnsafePathError: a link, FIFO or other non-regular file there, or (``own``) not ours.
        OSError: as ``os.open``.
    """
    from prefetch.fs.safefs import keep_private, open_file_stat

    fd, st = open_file_stat(path, flags, 0o600, own=own)
    keep_private(fd, st)
    return fd


def keep_log_private(path) -> None:
    """Make the log at ``path`` 0600 when it is a regular file of ours that others may read; else nothing."""
    import stat

    from prefetch.errors import UnsafePathError

    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077 and st.st_uid == os.geteuid() and st.st_nlink == 1:
            os.close(open_log(path, os.O_RDONLY))
    except (OSError, UnsafePathError):  # (gone, unreadable, or swapped for a link meanwhile: left)
        pass
