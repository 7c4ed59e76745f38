"""HTTP/1.1 pipelining on a direct connection (``net/direct.py``): the answer to a request
written while the answer before it was still arriving (``net/pipeline_send.py``), so it follows
that one's last bytes with no idle round trip (issue 20).

:func:`take_ahead` (``DirectPools.send``) reads the answer to a request sent ahead when the
same request (byte for byte) is asked for next, from the reader the answer before it was read
with (bytes of it buffered there are not lost). Anything unexpected (the server closed or reset,
a head that does not parse or comes late, a status other than 206, a ``Content-Range`` that does
not start where the request asked or ends beyond it, a length that disagrees) refuses
pipelining to that host for the rest of the process (:func:`refuse`), closes the connection and
returns None: the caller sends the request again on a fresh connection. A request asked for
next that is not the one sent ahead closes the connection (its answer is not read).

An answer sent ahead whose head does not come (bytes that are not a head, a close, a reset, a
late head; a head that parses, even a 503's, began in step) may mean the connection's answers
are out of step: the
answer before ran short of its ``Content-Length`` and its last bytes may be this one's head
(after which the server may also close or stall). ``take_ahead`` returns what came instead then (not
None): what the answer before read after the request went out is fetched again, and until an
answer sent ahead begins in step those bytes are not saved as done (``engine/ahead.py``).
"""

from __future__ import annotations

import re

_REFUSED: set[tuple] = set()  # (scheme, host, port) that failed a pipelined request: not again
_ANSWERED: dict[tuple, int] = {}  # (scheme, host, port) -> answers read to requests sent ahead
_RANGE = None  # re: a Content-Range value, "bytes FIRST-LAST/TOTAL"


def refused(key: tuple) -> bool:
    """``key`` = (scheme, host, port) failed a pipelined request in this process."""
    return key in _REFUSED


def answered(key: tuple) -> int:
    """How many answers to requests sent ahead ``key`` gave as asked in this process."""
    return _ANSWERED.get(key, 0)


def refuse(key: tuple) -> None:
    _REFUSED.add(key)


def take_ahead(conn, head: bytes, method: str, timeout: float):
    """http.client's answer to the request ``conn`` had sent ahead, when it is ``head``; else
    None, ``conn`` closed, when another request was asked or the answer was not the one asked for
    (pipelining refused to its host); what came instead (``_no_head``: a str), the same, when no
    head came (see the module's docstring)."""
    queued, conn.queued = conn.queued, None
    reader, conn.reader = conn.reader, None
    if queued is None or queued[0] != head or conn.sock is None or reader is None or reader.closed:
        if queued is not None and queued[0] == head:
            refuse(conn.key)  # (its answer cannot be read: no more of that there)
        if reader is not None:
            reader.close()
        conn.close()  # (another request: the one sent ahead is not wanted)
        return None
    from http.client import HTTPException

    from prefetch.net.read_head import read_answer

    no_head = "out of step"
    try:
        response = read_answer(conn.sock, method, timeout, reader=reader)
    except (OSError, HTTPException) as exc:  # closed, reset, garbage, no head in time
        response, no_head = None, _no_head(exc)
    if response is None or not _fits(response, queued[1], queued[2]):
        refuse(conn.key)
        if response is not None:
            response.close()
        reader.close()
        conn.close()
        # No head (garbage, a close, a reset, a late head): the answer before may have run short
        # and taken this one's first bytes, then the server stalled or closed, so its last bytes
        # are fetched again. A head that parsed (a 503, another range) began in step.
        return no_head if response is None else None
    _ANSWERED[conn.key] = _ANSWERED.get(conn.key, 0) + 1
    return response


def _no_head(exc: BaseException) -> str:
    """What came instead of an answer's head: ``closed`` (a close or a reset: http.client's
    ``RemoteDisconnected`` is one), ``stalled`` (no head in time), else ``out of step`` (bytes
    that are not a head)."""
    if isinstance(exc, ConnectionError):
        return "closed"
    if isinstance(exc, TimeoutError):
        return "stalled"
    return "out of step"


def _fits(response, start: int, end: int | None) -> bool:
    """The answer is the one asked for: HTTP/1.1 206, its range starting at ``start`` and ending
    within ``end``, a known length that agrees."""
    global _RANGE
    if response.status != 206 or response.version != 11 or response.chunked or response.length is None:
        return False
    if _RANGE is None:
        _RANGE = re.compile(r"\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*")
    match = _RANGE.fullmatch(response.getheader("Content-Range") or "")
    if match is None:
        return False
    first, last = int(match.group(1)), int(match.group(2))
    return (first == start and last >= first and (end is None or last < end)
            and response.length == last - first + 1)
