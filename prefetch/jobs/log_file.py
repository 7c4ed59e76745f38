"""A job's log file: appended line by line, and a disk that refuses a line never stops the job.

The state dir often sits on a small root disk that something else fills (a ``pip install``
beside the job) while the data goes to another one: the download must go on. A line that
cannot be written is counted and dropped; the next line that can be written is preceded by
one saying how many were lost and why.
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
