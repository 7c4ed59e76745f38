"""An answer's head: read whole within the read timeout, parsed without the ``email`` package.

Shared by the connections under requests (``net/connection.py``) and the direct ones
(``net/direct_conn.py``):

* :func:`within_deadline`: the whole response head (status line and headers) must arrive
  within the read timeout; the read timeout alone is per receive, so a server sending its
  head a byte a second would hold a worker for ever. The deadline shuts the socket down and
  the read ends in :class:`HeadTimeout`. While it waits, the socket is known to
  ``open_socket.abort_head`` (a stop);
* :func:`quick_response_class`: http.client's response whose ``begin`` parses a head of
  plain ``Name: value`` lines directly (:func:`_quick_headers`): the same ``HTTPMessage``
  http.client would build, at a fifth of the cost (a list of thousands of small files parses
  thousands of heads); anything else (a folded line, a stray CR, a multipart type) goes to
  http.client's parser;
* :func:`read_answer`: http.client's answer to a request already sent on a socket, under both.
"""

from __future__ import annotations

import socket
import threading

from prefetch.net.deadlines import call_at
from prefetch.net.open_socket import watched


class HeadTimeout(TimeoutError):
    """The response head did not arrive whole within the deadline."""


def within_deadline(sock, deadline, read):
    """``read()`` (a response head on ``sock``), the socket shut down when it takes longer than
    ``deadline`` seconds (None or 0: no deadline)."""
    if not deadline or sock is None:
        return read()
    expired = []  # (a list, not an Event: an Event is a Condition and a lock per request)

    def expire() -> None:
        expired.append(True)
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes the read below
        except OSError:
            pass

    timer = call_at(deadline, expire)  # one shared watchdog thread, not a thread per request
    me = threading.get_ident()
    watched[me] = sock  # (abort_head: a stop on a thread with no main loop watching it)
    try:
        response = read()
    except Exception:
        if expired:
            raise HeadTimeout(f"timed out: no complete response head within {deadline:g}s") from None
        raise
    finally:
        watched.pop(me, None)
        timer.cancel()
    if expired:
        raise HeadTimeout(f"timed out: no complete response head within {deadline:g}s")
    return response


def read_answer(sock, method: str, timeout: float, *, reader=None, kept: bool = False):
    """http.client's answer (its head read, its body not) to a request already sent on
    ``sock``: ``timeout`` on each receive and on the whole head (:func:`within_deadline`).

    ``kept`` (direct connections): an answer whose reader may be kept open when it ends (its
    ``keep``, ``net/pipeline.py``); ``reader``: read from that one (the last answer's, where
    bytes of this one may be buffered already) instead of a new one.

    Raises:
        HeadTimeout, OSError, http.client.HTTPException: as http.client's ``getresponse``.
    """
    if sock.gettimeout() != timeout:  # (settimeout is an ioctl even when nothing changes)
        sock.settimeout(timeout)
    response_class = kept_response_class() if kept or reader is not None else quick_response_class()
    source = sock if reader is None else _Reader(reader)

    def begin():
        response = response_class(source, method=method)
        try:
            response.begin()
        except BaseException:
            response.close()
            raise
        return response

    return within_deadline(sock, timeout, begin)


_CLASS: list = []
_KEPT: list = []


def quick_response_class():
    """http.client's ``HTTPResponse`` whose ``begin`` (http.client's own code, whatever the
    Python version) parses the head with :func:`_quick_headers` instead of the ``email``
    parser; http.client's class itself when its ``begin`` cannot be reused so."""
    if _CLASS:
        return _CLASS[0]
    import http.client
    import types

    stock = http.client.HTTPResponse
    code = stock.begin.__code__
    if code.co_freevars or not hasattr(http.client, "_read_headers"):
        _CLASS.append(stock)
    else:
        names = dict(vars(http.client), parse_headers=_quick_headers)
        _CLASS.append(type("QuickHeadResponse", (stock,), {"begin": types.FunctionType(code, names, "begin")}))
    return _CLASS[0]


class _Reader:
    """What http.client's response takes as its socket: ``makefile`` gives the reader kept."""

    __slots__ = ("reader",)

    def __init__(self, reader) -> None:
        self.reader = reader

    def makefile(self, mode):
        return self.reader


def kept_response_class():
    """:func:`quick_response_class` whose reader stays open at its end when ``keep`` is set."""
    if not _KEPT:  # (two threads may make it at once: either class is the same)
        def _close_conn(self):
            fp, self.fp = self.fp, None
            if not self.keep:
                fp.close()

        _KEPT.append(type("KeptResponse", (quick_response_class(),), {"keep": False, "_close_conn": _close_conn}))
    return _KEPT[0]


_HEADER_LINE = None  # re: a plain header line, ``Name: value`` (the email parser's name characters)


def _quick_headers(fp, _class=None):
    """``http.client.parse_headers`` for a head of plain lines: the same ``HTTPMessage``
    (names and values as the email parser's compat32 policy reads them), built directly."""
    import http.client
    import re

    global _HEADER_LINE
    lines = http.client._read_headers(fp)  # (its limits on line length and count)
    cls = _class or http.client.HTTPMessage
    if _HEADER_LINE is None:
        _HEADER_LINE = re.compile(rb"([!-9;-~]+):([^\r\n]*)\r?\n?\Z")
    msg = cls()
    for line in lines[:-1]:
        plain = _HEADER_LINE.match(line)
        if plain is None or b"multipart" in line:
            import email.parser

            return email.parser.Parser(_class=cls).parsestr(b"".join(lines).decode("iso-8859-1"))
        msg.set_raw(plain.group(1).decode("iso-8859-1"), plain.group(2).decode("iso-8859-1").lstrip(" \t"))
    msg.set_payload("")
    return msg
