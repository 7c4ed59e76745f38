"""``file://`` origins: a local file (a notebook's OSS or NAS mount) answered like a Range server.

A ``file://`` URL is read through the same engine as any origin, so a local copy is
resumable, verified and placed with the same guarantees. :func:`open_local` answers
one request the way a correct HTTP server would: ``206`` with ``Content-Range`` for
``Range: bytes=A-B``, ``200`` with the whole file otherwise, an ``ETag`` made of the
file's inode, size and modification time (and ``Last-Modified``), and ``If-Range``
honoured, so a file changed between two runs is copied again from byte 0 instead of
being stitched. Bodies are read with ``pread`` at their offset, one read at a time.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from urllib.parse import unquote, urlsplit

from prefetch.errors import HTTPStatusError, NetworkError

_RANGE = r"^\s*bytes\s*=\s*(\d+)-(\d*)\s*$"  # compiled on first use (re's cache): file:// only
_LOCAL_HOSTS = ("", "localhost")


def is_file_url(url: str) -> bool:
    """True for a ``file:`` URL."""
    return url[:5].lower() == "file:"


def file_url_path(url: str) -> Path:
    """The local path of a ``file://`` URL (``file:///a%20b`` -> ``/a b``).

    Raises:
        NetworkError: a host other than ``localhost``, or a relative path.
    """
    parts = urlsplit(url.partition("#")[0])
    if (parts.hostname or "") not in _LOCAL_HOSTS:
        raise NetworkError(f"invalid URL {url}: a file:// URL names a local file (file:///path), "
                           f"not one on host {parts.hostname!r}")
    path = unquote(parts.path)
    if not path.startswith("/"):
        raise NetworkError(f"invalid URL {url}: a file:// URL needs an absolute path (file:///path)")
    return Path(path)


def local_etag(st: os.stat_result) -> str:
    """A strong validator for a local file: inode, size and modification time."""
    return f'"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"'


class LocalResponse:
    """The answer to one request for a local file; the same surface as ``net.http.Response``."""

    def __init__(self, url: str, fd: int | None, status: int, headers: dict[str, str], start: int, length: int):
        from requests.structures import CaseInsensitiveDict

        self.url = url
        self.status = status
        self.headers = CaseInsensitiveDict(headers)
        self._fd = fd
        self._pos = start
        self._left = length

    def readinto(self, buffer) -> int:
        """Read the next bytes of the body into ``buffer``; 0 at its end."""
        if self._fd is None or self._left <= 0:
            self.close()
            return 0
        view = memoryview(buffer)[: min(len(buffer), self._left)]
        n = os.preadv(self._fd, [view], self._pos)
        if not n:  # the file was cut short while we read it
            left, self._left = self._left, 0
            raise OSError(f"the local file ended {left} bytes early (it changed while being copied)")
        self._pos += n
        self._left -= n
        return n

    def peek(self, n: int) -> bytes:
        """Up to the next ``n`` bytes of the body, without consuming them (a ``pread``)."""
        if self._fd is None:
            return b""
        return os.pread(self._fd, min(n, self._left), self._pos)

    def read(self, amount: int | None = None) -> bytes:
        out = bytearray()
        while amount is None or len(out) < amount:
            buffer = bytearray(min(1 << 20, (amount - len(out)) if amount is not None else 1 << 20))
            n = self.readinto(buffer)
            if not n:
                break
            out += buffer[:n]
        return bytes(out)

    def text(self) -> str:
        return self.read().decode("utf-8", errors="replace")

    @property
    def complete(self) -> bool:
        return self._left <= 0

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def abort(self) -> None:
        """Nothing blocks on a local read for long; the next read simply ends."""
        self._left = 0

    def __enter__(self) -> "LocalResponse":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_local(url: str, *, headers: dict[str, str] | None = None, method: str = "GET") -> LocalResponse:
    """Answer one request for the local file a ``file://`` URL names.

    Raises:
        HTTPStatusError: no such file (404), not a regular file or not readable (403); final.
        NetworkError: a malformed ``file://`` URL.
    """
    path = file_url_path(url)
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise HTTPStatusError(f"{path}: no such file", status=404) from None
    except OSError as exc:
        raise HTTPStatusError(f"cannot read {path}: {exc.strerror or exc}", status=403) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise HTTPStatusError(f"{path} is not a regular file", status=403)
        size = st.st_size
        etag = local_etag(st)
        from email.utils import formatdate  # file:// only: not imported at start-up

        modified = formatdate(st.st_mtime, usegmt=True)
        common = {"ETag": etag, "Last-Modified": modified, "Accept-Ranges": "bytes",
                  "Content-Type": "application/octet-stream"}
        wanted = re.match(_RANGE, headers.get("range", ""), re.I)
        if_range = headers.get("if-range")
        if wanted and if_range is not None and if_range.strip() not in (etag, modified):
            wanted = None  # the file changed since the validator was taken: the whole file, as HTTP says
        if wanted:
            first = int(wanted.group(1))
            last = min(int(wanted.group(2)), size - 1) if wanted.group(2) else size - 1
            if first >= size or last < first:
                os.close(fd)
                return LocalResponse(url, None, 416, {**common, "Content-Range": f"bytes */{size}",
                                                      "Content-Length": "0"}, 0, 0)
            length = last - first + 1
            answer = {**common, "Content-Range": f"bytes {first}-{last}/{size}", "Content-Length": str(length)}
            status, start = 206, first
        else:
            status, start, length = 200, 0, size
            answer = {**common, "Content-Length": str(size)}
        if method.upper() == "HEAD":
            length = 0
        return LocalResponse(url, fd, status, answer, start, length)
    except BaseException:
        try:
            os.close(fd)
        except OSError:
            pass
        raise
