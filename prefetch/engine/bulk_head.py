"""The bulk lane's answer heads: strict HTTP/1.1 only (``engine/bulk.py`` frames pipelined
answers by them, so anything it cannot frame for sure ends the lane for the connection).

:func:`parse_head` reads one head from a connection's unread bytes: a status line, ``Name:
value`` lines within http.client's limits (the usual path's reader keeps them:
``net/read_head.py``), one ``Content-Length`` and no ``Transfer-Encoding``; :class:`Head` is
what ``check_response`` reads of it. Imports nothing of prefetch.
"""

from __future__ import annotations

import re

_STATUS = re.compile(rb"HTTP/1\.1 ([1-9][0-9][0-9])(?: [^\r\n]*)?")
_NAME = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_LONGEST_HEAD = 64 << 10
# http.client's limits, which the usual path's reader keeps (net/read_head.py): a line (with its
# CRLF) of at most 65536 bytes, at most 100 lines after the status line counting the blank one.
_MAX_LINE = 65536
_MAX_LINES = 100


class Head:
    """A parsed answer: what ``check_response`` reads of a response (``status``, ``headers``, ``peek``)."""

    __slots__ = ("status", "headers", "body", "close", "elapsed")

    def __init__(self, status: int, headers: "_Headers", close: bool) -> None:
        self.status, self.headers, self.close, self.body = status, headers, close, b""
        self.elapsed = 0.0  # seconds from its request written to its answer read whole

    def peek(self, n: int) -> bytes:
        return bytes(self.body[:n])


class _Headers(dict):
    """Header values by lower-cased name (``get``/``[]`` without case, as http.client's)."""

    def get(self, name, default=None):
        return dict.get(self, name.lower(), default)

    def __getitem__(self, name):
        return dict.__getitem__(self, name.lower())

    def __contains__(self, name):
        return dict.__contains__(self, name.lower())


class OutOfStep(Exception):
    """The connection's bytes are not answers we can frame: nothing more is read from it."""


_LINES: dict[bytes, tuple[str, str]] = {}  # header lines met before: (lower-cased name, value)
_LINES_KEPT = 512  # (a server's answers repeat most of their lines: Server, Content-Type, Content-Length ...)


def _header_line(line: bytes) -> tuple[str, str]:
    """A ``Name: value`` line as (lower-cased name, value), remembered for the answers after it.

    Raises:
        OutOfStep: not a ``Name: value`` line.
    """
    name, sep, value = line.partition(b":")
    if not sep or _NAME.fullmatch(name) is None or b"\r" in value or b"\n" in value:
        raise OutOfStep("a header line that is not Name: value")
    got = name.decode("ascii").lower(), value.strip(b" \t").decode("latin-1")
    if len(_LINES) >= _LINES_KEPT:
        _LINES.clear()  # (each file's own lines, ETag, Last-Modified, fill it: the lines that repeat come back at once)
    _LINES[line] = got
    return got


def parse_head(data: bytes, start: int = 0) -> tuple[Head, int] | None:
    """``(head, where its body starts)`` for the head at ``data[start:]``; None: not all there yet.

    Raises:
        OutOfStep: not a strict HTTP/1.1 head with a ``Content-Length`` (garbage, chunked, ...).
    """
    end = data.find(b"\r\n\r\n", start)
    if end < 0:
        if len(data) - start >= _LONGEST_HEAD or (len(data) > start and
                                                  not b"HTTP/1.1 ".startswith(bytes(data[start:start + 9]))):
            raise OutOfStep("not an answer's head")
        return None
    lines = bytes(data[start:end]).split(b"\r\n")
    if len(lines) > _MAX_LINES or max(map(len, lines)) + 2 > _MAX_LINE:
        raise OutOfStep("a head the usual path's reader refuses (http.client's limits)")
    match = _STATUS.fullmatch(lines[0])
    if match is None or match.group(1).startswith(b"1"):
        raise OutOfStep(f"status line {lines[0][:40]!r}")
    headers = _Headers()
    for line in lines[1:]:
        key, text = _LINES.get(line) or _header_line(line)
        had = dict.get(headers, key)
        if had is None:
            headers[key] = text
        elif key != "content-length":
            headers[key] = f"{had}, {text}"
        elif had != text:
            raise OutOfStep("two Content-Lengths")
    length = headers.get("content-length")
    if "transfer-encoding" in headers or length is None or not length.isdigit():
        raise OutOfStep("no Content-Length (or a Transfer-Encoding)")
    close = "close" in headers.get("connection", "").lower()
    return Head(int(match.group(1)), headers, close), end + 4
