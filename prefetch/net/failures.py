"""What went wrong on the wire, in words and kinds: the failures of :mod:`prefetch.net.http`.

:class:`TransientHTTPError` is a failure worth retrying, with a :class:`Failure`
kind that the retry policy and the source failover read; :func:`describe_error`
and :func:`failure_kind` turn an exception from requests, urllib3 or the socket
under them into one short cause and a kind.
"""

from __future__ import annotations

import time


class Failure:
    """Kinds of :class:`TransientHTTPError` (what the retry policy and the failover read)."""

    UNREACHABLE = "unreachable"  # name lookup failed, connection refused or unreachable, connect timed out
    TIMEOUT = "timeout"  # connected, but no head (or no body bytes) in time
    BROKEN = "broken"  # the connection broke or closed early
    STATUS = "status"  # the server answered (429, 5xx): it is alive
    WEB_PAGE = "web page"  # a web page (or another type) instead of the file: a captive portal or block page
    BAD_ANSWER = "bad answer"  # an answer we cannot use (Content-Range, encoding)


class TransientHTTPError(Exception):
    """A failure worth retrying (connection reset, timeout, 5xx, 429).

    ``str()`` names the host; ``cause`` is the failure alone ("Connection refused",
    "timed out", "HTTP 503"), for a table that already names the host. ``unresolved``: (host,
    errno, text) when it is a name lookup that failed (the proxy's, with ``proxy`` named);
    ``net/unresolved.py`` reads them. ``unreached``: (host, port, errno, text) when the kernel
    refused the connect itself (refused, no route, a firewall's rule): ``net/unreachable.py``.
    """

    unresolved: tuple[str, int, str] | None = None
    unreached: tuple[str, int, int, str] | None = None
    proxy: str | None = None

    def __init__(self, message: str, *, cause: str | None = None, retry_after: float | None = None,
                 status: int | None = None, timed_out: bool = False, kind: str | None = None) -> None:
        super().__init__(message)
        self.cause = cause or message
        self.retry_after = retry_after
        self.status = status
        self.timed_out = timed_out
        self.kind = kind or (Failure.STATUS if status else Failure.TIMEOUT if timed_out else Failure.BROKEN)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    import email.utils  # an HTTP-date: rare; not imported at start-up

    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def describe_error(exc: BaseException) -> str:
    """The short cause of a connection failure ("Connection refused"), for one line."""
    import http.client
    import socket

    from prefetch.net.read_head import HeadTimeout

    exc = _root_cause(exc)
    if isinstance(exc, HeadTimeout):
        return str(exc)
    if isinstance(exc, (socket.timeout, TimeoutError)) or _is_timeout_class(exc):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"name lookup failed ({exc.strerror or exc})"
    if _is_remote_disconnected(exc):
        return "the server closed the connection without answering"
    if isinstance(exc, http.client.IncompleteRead):
        return f"the server closed the connection with {exc.expected} more bytes announced"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = shown_text(str(exc) or type(exc).__name__, wire=True)  # (a status line as read: the server's bytes)
    return text if len(text) < 160 else text[:157] + "..."


def shown_text(text: str, *, wire: bool = False) -> str:
    """``text`` on one line, readable and the same in every run: a byte that was not UTF-8 as
    ``\\xff`` (never ``\\udcff`` nor a Latin-1 guess such as ``ÿ``), a control as ``\\r``, ``\\n``,
    ``\\t`` or ``\\x1b``. ``wire``: ``text`` holds a server's bytes as http.client decodes them
    (Latin-1, a byte a character): those that form UTF-8 are shown as such."""
    if text.isascii() and text.isprintable():
        return text
    if wire:
        try:
            text = text.encode("latin-1").decode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            pass  # (decoded already: characters past Latin-1)
    return "".join(shown_char(ch) for ch in text)


def shown_char(ch: str) -> str:
    """One character as :func:`shown_text` shows it (itself when it needs no escape)."""
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0:
        return {"\r": "\\r", "\n": "\\n", "\t": "\\t"}.get(ch) or f"\\x{code:02x}"
    return ch


def failure_kind(exc: BaseException) -> str:
    """The :class:`Failure` kind of an exception from requests, urllib3, a direct connection or the socket."""
    import socket

    chain = chain_of(exc)
    names = {type(e).__name__ for e in chain}
    if names & {"NameResolutionError", "ConnectTimeoutError", "ConnectTimeout", "NewConnectionError",
                 "ConnectFailed"} or any(  # (ConnectFailed: a direct connect's, net/direct_conn.py)
            isinstance(e, (socket.gaierror, ConnectionRefusedError)) for e in chain):
        return Failure.UNREACHABLE
    if any(isinstance(e, OSError) and e.errno in _UNREACHABLE_ERRNOS for e in chain):
        return Failure.UNREACHABLE
    if any(isinstance(e, (socket.timeout, TimeoutError)) for e in chain) or names & {"ReadTimeoutError", "ReadTimeout"}:
        return Failure.TIMEOUT
    return Failure.BROKEN


def chain_of(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps: requests' wrappers, urllib3's (``reason``, args), the socket's."""
    chain = []
    seen = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        chain.append(node)
        inner = getattr(node, "reason", None)
        if not isinstance(inner, BaseException):
            inner = next((a for a in reversed(node.args) if isinstance(a, BaseException)), None)
        node = inner or node.__cause__ or (None if node.__suppress_context__ else node.__context__)
    return chain


def _errnos(*names: str) -> frozenset[int]:
    import errno

    return frozenset(getattr(errno, n) for n in names if hasattr(errno, n))


_UNREACHABLE_ERRNOS = _errnos("ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN", "ENETDOWN", "EADDRNOTAVAIL")


def _root_cause(exc: BaseException) -> BaseException:
    """The most specific exception under requests' and urllib3's wrappers."""
    return chain_of(exc)[-1]


def _is_remote_disconnected(exc: BaseException) -> bool:
    import http.client

    return isinstance(exc, http.client.RemoteDisconnected)


def _is_timeout_class(exc: BaseException) -> bool:
    return type(exc).__name__ in ("ReadTimeoutError", "ConnectTimeoutError", "ReadTimeout", "ConnectTimeout",
                                  "Timeout")


def _ssl_reason(exc: BaseException) -> str:
    root = _root_cause(exc)
    text = getattr(root, "verify_message", None)
    reason = str(root)
    if text and text not in reason:
        reason = f"{reason} ({text})"
    return reason if len(reason) < 300 else reason[:297] + "..."


def spoke_plain_http(reason: str) -> bool:
    """A TLS error saying the other end answered the handshake in plain HTTP (OpenSSL's "wrong
    version number", "packet length too long", "http request", "record layer failure")."""
    reason = reason.lower()
    return any(s in reason for s in ("wrong version number", "packet length too long", "http request",
                                     "record layer failure"))
