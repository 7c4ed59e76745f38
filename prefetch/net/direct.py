"""Requests sent on connections of our own, when requests would add nothing to them.

:class:`prefetch.net.http.Client` sends a request here when it needs nothing of requests:
no proxy from the environment, no credentials from ``~/.netrc`` or the URL, no cookie kept
from an earlier answer, and a URL that requests would send unchanged (ASCII and nothing to
quote; a ``%`` escape, which requests re-quotes, goes through requests). Such a request costs
neither ``import requests`` (0.1-0.2 s of a process's start: requests also loads
charset_normalizer) nor ``import urllib3`` (50-80 ms more), nor requests' preparation of every
request (its hooks, cookie jar and settings merge, about a third of a millisecond; a list of
2,000 small files makes 2,000), nor urllib3's urlopen (its Timeout, Retry and response
objects, ~0.2 ms a request).

What goes out is what requests would send: the same default headers, written as urllib3 and
http.client write them (``net/write_head.py``), on connections made as urllib3 makes them
(``net/direct_conn.py``: ``PREFETCH_RESOLVE``, the same TLS verification), the same connect
and read timeouts, the head deadline (``net/read_head.py``), no retries and no redirects.
A pool keeps up to 10 idle connections for each of the last 10 (scheme, host, port), as
requests' adapter does; an idle one the server closed meanwhile is dropped when taken.
Failures are the socket's, http.client's and ssl's own exceptions (a TCP connect's wrapped
in ``ConnectFailed``); ``Client.request`` maps them exactly as it maps requests'. A
``Set-Cookie`` in an answer moves the client to requests for good (``Client`` keeps the cookie
in requests' jar), so a server that relies on cookies sees what requests sends.
"""

from __future__ import annotations

import errno
from urllib.parse import urlsplit

from prefetch.net.answer import Answer
from prefetch.net.direct_conn import Connection
from prefetch.net.read_head import read_answer
from prefetch.net.write_head import request_head

# Characters requests' requote_uri leaves alone, less "%" (it re-quotes escapes) and "@"
# (credentials in the URL are requests' to send).
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" "-._~:/?#[]!$&'()*+,;=")

# requests' default headers (``requests.utils.default_headers``) with the two Client sets.
_DEFAULT_HEADERS = (("Accept", "*/*"), ("Connection", "keep-alive"))

# requests' HTTPAdapter: pools for 10 hosts, 10 connections each (more at once are not kept).
POOLS = 10
IDLE = 10


def plain_url(url: str) -> bool:
    """Whether requests would send ``url`` unchanged and without credentials taken from it."""
    return _PLAIN.issuperset(url)


def merged_headers(defaults: dict[str, str], headers: dict[str, str] | None) -> dict[str, str]:
    """The client's headers, then requests' defaults, then the caller's (a caller's header
    replaces a default of any case, as requests' merge does)."""
    merged = dict(defaults)
    for name, value in _DEFAULT_HEADERS:
        merged.setdefault(name, value)
    if headers:
        named = {k.lower(): k for k in merged}  # (names compared without case, as requests' merge does)
        for name, value in headers.items():
            existing = named.pop(name.lower(), None)
            if existing is not None:
                del merged[existing]
            if value is not None:
                merged[name] = value
                named[name.lower()] = name
    return merged


class DirectPools:
    """Idle connections by (scheme, host, port); one per ``Client`` (not thread-safe)."""

    def __init__(self, resolve: dict[str, str | None], verify: bool | str) -> None:
        self._resolve = resolve
        self._verify = verify
        self._context = None  # https: the ssl.SSLContext, made on the first https connection
        self._idle: dict[tuple, list[Connection]] = {}  # least recently used first
        self._parsed: tuple = (None, None, None)  # (url, key, target) of the last request
        self._keys: dict[tuple[str, str], tuple] = {}  # (scheme, netloc) -> (scheme, host, port)
        self._epoch = 0  # one more at each close(): a connection out then is closed when it comes back
        self._ahead: dict[tuple, Connection] = {}  # a connection whose next request went out already
        self.misframed = ""  # an answer sent ahead began with no head: what came instead (net/pipeline.py)

    def _parse(self, url: str) -> tuple[tuple, str]:
        """((scheme, host, port), the request target) for ``url``."""
        last = self._parsed
        if last[0] == url:
            return last[1], last[2]
        parts = urlsplit(url)
        key = self._keys.get((parts.scheme, parts.netloc))
        if key is None:  # (a host's key once, not its hostname and port parsed again per request)
            scheme = parts.scheme.lower()
            key = (scheme, parts.hostname, parts.port or (443 if scheme == "https" else 80))
            if len(self._keys) >= 256:
                self._keys.clear()
            self._keys[parts.scheme, parts.netloc] = key
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._parsed = (url, key, target)
        return key, target

    def prepare(self, url: str) -> None:
        """An https URL's TLS context built now (``Client.prepare``): loading the trust store is
        ~30 ms of CPU, far more on a loaded machine, and inside the first request it counted as
        the route's round trip (a near host judged a long route: 31 connections opened ahead).
        Only a warm-up, outside any request's error handling: a bundle that cannot be loaded (no
        certificate in it) is left to the first connection, whose TLS error says so (exit 3)."""
        if url[:6].lower() == "https:":
            try:
                self._tls()
            except OSError:  # (ssl.SSLError: "no certificate or crl found")
                pass

    def _tls(self):
        """The https connections' ``ssl.SSLContext``, made on first need (``net.tls_context``)."""
        if self._context is None:
            from prefetch.net.tls_context import context_for

            self._context = context_for(self._verify)
        return self._context

    def _new(self, key: tuple, timeout: float) -> Connection:
        conn = Connection(key, self._epoch)
        conn.connect(self._resolve, timeout, self._tls() if key[0] == "https" else None)
        return conn

    def _take(self, key: tuple) -> Connection | None:
        """The most recently used idle connection to ``key`` the server has not closed, else None."""
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.dropped():
                return conn
            conn.close()
        return None

    def put(self, conn: Connection) -> None:
        """Keep ``conn`` idle for the next request to its host (closed when its host has
        ``IDLE`` already; the least recently used host's go when ``POOLS`` hosts have some)."""
        if conn.sock is None:
            return
        if conn.epoch != self._epoch:
            conn.close()  # (out when the pools closed, as urllib3's closed pool closes it)
            return
        if conn.queued is not None:  # a request sent ahead (net/pipeline.py): kept for it alone
            old = self._ahead.pop(conn.key, None)
            if old is not None:
                old.close()
            self._ahead[conn.key] = conn
            return
        idle = self._idle.pop(conn.key, None)
        if idle is None:
            idle = []
        self._idle[conn.key] = idle  # (now the most recently used)
        if len(idle) >= IDLE:
            conn.close()
        else:
            idle.append(conn)
        while len(self._idle) > POOLS:
            for old in self._idle.pop(next(iter(self._idle))):
                old.close()

    def connect(self, url: str, timeout: float) -> None:
        """Open a connection (TCP, and TLS for https) to ``url``'s host without sending
        anything; it waits idle for the next request there (the socket's, ssl's or
        ``ConnectFailed`` when the connect fails)."""
        key, _ = self._parse(url)
        self.put(self._new(key, timeout))

    def send(self, method: str, url: str, headers: dict[str, str], connect: float, read: float) -> Answer:
        """Send one request on an idle connection to the host, else a new one: the answer,
        its head read and its body not (the socket's, http.client's or ssl's exception, or
        ``ConnectFailed``, when it fails; the connection is closed then).

        As urllib3's urlopen: the connect timeout while connecting and sending (on a kept-alive
        connection the read timeout it still has, when not shorter), the read timeout on each
        receive after, the whole head within it; a server that closes or
        resets while the request goes out may still have answered, so its answer is read."""
        key, target = self._parse(url)
        head = request_head(method, target, key[1], key[2], key[0], headers)
        conn = None
        if self._ahead:
            ahead = self._ahead.pop(key, None)
            if ahead is not None:  # its request went out already: its answer, if it is this one's
                from prefetch.net.pipeline import take_ahead

                answer = take_ahead(ahead, head, method, read)
                if isinstance(answer, str):  # no head: what came instead (a close, a stall, garbage)
                    self.misframed = answer  # (the answer before it may have ended out of step)
                elif answer is not None:
                    if answer.will_close:
                        ahead.close()
                    return Answer(answer, ahead, self)
                conn = self._new(key, connect)  # (else once more, on a fresh connection)
        if conn is None:
            conn = self._take(key) or self._new(key, connect)
        try:
            sock = conn.sock
            if read is None or sock.gettimeout() != read or (connect is not None and connect > read):
                # (a request head on a kept-alive connection is sent at once: under the answer's
                # deadline the socket still has from the last request, when that one is not
                # shorter, no ioctl to switch the socket's timeout there and back per request)
                sock.settimeout(connect)
            try:
                sock.sendall(head)
            except BrokenPipeError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
                    raise
            answer = read_answer(sock, method, read, kept=True)
            if answer.will_close:
                conn.close()  # (as http.client: the answer keeps reading from its socket)
            return Answer(answer, conn, self)
        except BaseException:
            conn.close()
            raise

    def drop_ahead(self) -> None:
        """Close the connections whose request sent ahead nobody will ask for."""
        ahead, self._ahead = self._ahead, {}
        for conn in ahead.values():
            conn.close()

    def close(self) -> None:
        """Close the idle connections; one still out is closed when it comes back."""
        self._epoch += 1
        self.drop_ahead()
        idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()
