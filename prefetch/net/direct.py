"""Requests sent through urllib3 directly, when requests would add nothing to them.

:class:`prefetch.net.http.Client` sends a request here when it needs nothing of requests:
no proxy from the environment, no credentials from ``~/.netrc`` or the URL, no cookie kept
from an earlier answer, and a URL that requests would send unchanged (ASCII and nothing to
quote; a ``%`` escape, which requests re-quotes, goes through requests). Such a request costs
neither ``import requests`` (0.1-0.2 s of a process's start: requests also loads
charset_normalizer) nor requests' preparation of every request (its hooks, cookie jar and
settings merge, about a third of a millisecond; a list of 2,000 small files makes 2,000).

What goes out is what requests would send: the same default headers, the same urllib3 pools
and connections (``net/connection.py``: ``PREFETCH_RESOLVE`` and the head deadline), the same
TLS verification (the bundle the environment names, else certifi's, as requests), the same
connect and read timeouts, no retries and no redirects inside urllib3. Failures are urllib3's
and the socket's own exceptions; ``Client.request`` maps them exactly as it maps requests'.
A ``Set-Cookie`` in an answer moves the client to requests for good (``Client`` keeps the
cookie in requests' jar), so a server that relies on cookies sees what requests sends.

A GET on a connection kept alive from an earlier answer skips urlopen (:func:`_send_warm`):
the request head is written whole (the same bytes http.client would write; anything it would
refuse or urllib3 would re-encode goes through urlopen instead), the answer's head is read by
http.client's own response class under the same deadline, and urlopen's exceptions are raised
for its failures. urlopen's machinery cost ~0.2 ms a request, a sixth of a small file's CPU.
"""

from __future__ import annotations

import os
import string
from urllib.parse import urlsplit

# Characters requests' requote_uri leaves alone, less "%" (it re-quotes escapes) and "@"
# (credentials in the URL are requests' to send).
_PLAIN = frozenset(string.ascii_letters + string.digits + "-._~:/?#[]!$&'()*+,;=")

# requests' default headers (``requests.utils.default_headers``) with the two Client sets.
_DEFAULT_HEADERS = (("Accept", "*/*"), ("Connection", "keep-alive"))


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
    """A urllib3 ``PoolManager`` with prefetch's connection pools; one per ``Client`` (not thread-safe)."""

    def __init__(self, resolve: dict[str, str | None], verify: bool | str) -> None:
        import urllib3

        from prefetch.net.connection import pool_classes

        # requests' HTTPAdapter defaults: 10 pools of up to 10 connections, not blocking.
        self.manager = urllib3.PoolManager(num_pools=10, maxsize=10, block=False)
        self.manager.pool_classes_by_scheme = pool_classes(resolve)
        self._timeout = urllib3.Timeout
        self._timeouts: dict = {}  # (connect, read) -> urllib3.Timeout (the pool clones it per request)
        # No retries, no redirects: what urlopen would build from retries=False, redirect=False on every
        # request (a Retry is immutable: increment() returns a new one).
        self._no_retries = urllib3.Retry(False, redirect=False)
        self._verify = verify
        self._tls: dict | None = None  # https pools' verification, worked out on the first https request

    def _tls_kwargs(self) -> dict:
        if self._tls is None:
            tls: dict = {"cert_reqs": "CERT_REQUIRED"}
            if self._verify is True:
                import certifi

                tls["ca_certs"] = certifi.where()
            elif os.path.isdir(self._verify):
                tls["ca_cert_dir"] = self._verify
            else:
                tls["ca_certs"] = self._verify
            self._tls = tls
        return self._tls

    _last: tuple | None = None  # ((scheme, netloc), pool) of the last request: a list's files go to one host

    def _pool(self, url: str):
        parts = urlsplit(url)
        last = self._last
        if last is not None and last[0] == (parts.scheme, parts.netloc) and last[1].pool is not None:
            return parts, last[1]  # (the manager's own pool for it, unless closed: urllib3 1.x closes the pools it evicts)
        scheme = parts.scheme.lower()
        pool = self.manager.connection_from_host(parts.hostname, parts.port, scheme=scheme,
                                                 pool_kwargs=self._tls_kwargs() if scheme == "https" else None)
        self._last = ((parts.scheme, parts.netloc), pool)
        return parts, pool

    def connect(self, url: str, timeout: float) -> None:
        """Open a connection (TCP, and TLS for https) to ``url``'s host without sending
        anything; it waits in the pool for the next request there (urllib3's exception when
        the connect fails)."""
        _, pool = self._pool(url)
        conn = pool._get_conn()  # (urllib3's own take / put back, as urlopen does)
        try:
            conn.timeout = timeout
            conn.connect()
        except BaseException:
            conn.close()
            pool._put_conn(None)
            raise
        pool._put_conn(conn)

    def send(self, method: str, url: str, headers: dict[str, str], connect: float, read: float):
        """Send one request; the urllib3 response, its body unread (urllib3's, http.client's or
        the socket's exception when it fails)."""
        parts, pool = self._pool(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if method == "GET" and (head := self._head(pool, method, path, headers)) is not None:
            conn = _warm_conn(pool)
            if conn is not None:
                return _send_warm(pool, conn, head, method, path, connect, read)
        timeout = self._timeouts.get((connect, read))
        if timeout is None:
            timeout = self._timeouts[(connect, read)] = self._timeout(connect=connect, read=read)
        return pool.urlopen(method, path, body=None, headers=headers, retries=self._no_retries, redirect=False,
                            assert_same_host=False, preload_content=False, decode_content=False,
                            timeout=timeout)

    def close(self) -> None:
        self._last = None
        self.manager.clear()

    _heads: dict | None = None  # (pool host, port, scheme, header lines) -> the head after its request line

    def _head(self, pool, method: str, path: str, headers: dict[str, str]) -> bytes | None:
        """The request head urllib3 and http.client would send for ``path`` on ``pool``'s
        connection (request line, Host, the headers in order), or None when something in it
        is not plainly what they would send unchanged (then urlopen sends it, and says why not)."""
        if "[" in path or "]" in path:
            return None  # (urllib3 would percent-encode them)
        lines = tuple(headers.items())
        heads = self._heads
        if heads is None:
            heads = self._heads = {}
        key = (pool.host, pool.port, pool.scheme, lines)
        rest = heads.get(key)
        if rest is None:
            rest = _header_block(pool, lines)
            if rest is None:
                return None
            if len(heads) > 64:
                heads.clear()  # (a Range or validator per file: the table stays small)
            heads[key] = rest
        return b"%s %s HTTP/1.1\r\n%s" % (method.encode("ascii"), path.encode("ascii"), rest)


def _warm_conn(pool):
    """The pool's idle connection if it is still open (urllib3's own check), else None."""
    queue = pool.pool
    if queue is None or not queue.queue or queue.queue[-1] is None or queue.queue[-1].sock is None:
        return None
    conn = pool._get_conn()  # (takes it; closes it when the server has dropped it)
    if conn.sock is None:
        pool._put_conn(conn)
        return None
    return conn


_SKIP_HEADER = "@@@SKIP_HEADER@@@"  # urllib3.util.SKIP_HEADER: a value that makes urllib3 leave its header out


def _header_block(pool, lines: tuple) -> bytes | None:
    """The headers http.client's putrequest and putheader write after the request line for
    urllib3's ``request(method, path, headers=...)`` on ``pool``'s connection (Host unless
    given, then each header as given; ``Accept-Encoding`` and ``User-Agent`` are always
    among them here), ending with the blank line; None if a name or value would be refused
    or is not plain Latin-1 (urlopen then sends it and raises what it raises)."""
    import http.client

    legal = getattr(http.client, "_is_legal_header_name", None)
    illegal = getattr(http.client, "_is_illegal_header_value", None)
    names = {name.lower() for name, _ in lines}
    if legal is None or illegal is None or "accept-encoding" not in names or "user-agent" not in names \
            or names & {"content-length", "transfer-encoding"}:
        return None
    out = []
    if "host" not in names:
        host = pool.host.rstrip(".")  # (urllib3's connection drops a trailing dot)
        try:
            enc = host.encode("ascii")
        except UnicodeEncodeError:
            enc = host.encode("idna")
        if ":" in host:
            enc = http.client._strip_ipv6_iface(b"[" + enc + b"]")
        port = pool.port or (443 if pool.scheme == "https" else 80)
        out.append(b"Host: " + (enc if port == (443 if pool.scheme == "https" else 80) else b"%s:%d" % (enc, port)))
    for name, value in lines:
        if not isinstance(name, str) or not isinstance(value, str) or value == _SKIP_HEADER:
            return None
        try:
            name_b, value_b = name.encode("ascii"), value.encode("latin-1")
        except UnicodeEncodeError:
            return None
        if not legal(name_b) or illegal(value_b):
            return None
        out.append(name_b + b": " + value_b)
    out.append(b"\r\n")
    return b"\r\n".join(out)


def _send_warm(pool, conn, head: bytes, method: str, path: str, connect: float, read: float):
    """urlopen's request on a connection kept alive from an earlier answer, without its
    machinery (a Timeout, a Retry, header checks and urllib3's response object per request:
    ~0.2 ms of a small file's ~1.3 ms): the same bytes out, the same exceptions out (urlopen's
    wrapping: a timeout is ReadTimeoutError, connection trouble ProtocolError, TLS SSLError),
    the connection dropped after a failure, and an answer object with what
    ``net/response.py`` reads of urllib3's."""
    import errno
    from http.client import HTTPException
    from ssl import CertificateError, SSLError as BaseSSLError

    from urllib3.exceptions import ProtocolError, SSLError, TimeoutError as PoolTimeout

    pool.num_requests += 1
    try:
        try:
            conn.timeout = connect
            sock = conn.sock
            if sock.gettimeout() != read or connect > read:
                # (a request head on a kept-alive connection is sent at once: under the answer's
                # deadline the socket still has from the last request, when that one is not
                # shorter, no ioctl to switch the socket's timeout there and back per request)
                sock.settimeout(connect)
            try:
                sock.sendall(head)
            except BrokenPipeError:
                pass  # (urllib3: the server may close after a valid answer, which is still readable)
            except OSError as exc:
                if exc.errno not in (errno.EPROTOTYPE, errno.ECONNRESET):
                    raise
            conn.timeout = read
            try:
                answer = conn.read_head(method)
            except (BaseSSLError, OSError) as exc:
                pool._raise_timeout(err=exc, url=path, timeout_value=read)
                raise
        except (PoolTimeout, HTTPException, OSError, ProtocolError, BaseSSLError, SSLError, CertificateError) as exc:
            if isinstance(exc, (BaseSSLError, CertificateError)):
                raise SSLError(exc) from None
            if isinstance(exc, (OSError, HTTPException)):
                raise ProtocolError("Connection aborted.", exc) from None
            raise
        warm = WarmAnswer(answer, conn, pool)
    except BaseException:
        conn.close()
        pool._put_conn(None)  # (as urlopen: the pool opens a fresh one next time)
        raise
    return warm


class WarmAnswer:
    """What :class:`prefetch.net.response.Response` (and requests' cookie jar) read of urllib3's
    ``HTTPResponse``, for an answer :func:`_send_warm` read: http.client's response, its status,
    its headers (case-insensitive, repeated ones joined as urllib3 joins them), and the
    connection to give back to the pool."""

    __slots__ = ("_fp", "_original_response", "status", "headers", "_connection", "_pool")

    def __init__(self, fp, conn, pool) -> None:
        self._fp = self._original_response = fp
        self.status = fp.status
        self.headers = Head(fp.msg)
        self._connection = conn
        self._pool = pool
        length = self.headers.get("content-length")
        if length is not None and "," in length and not fp.chunked:
            try:
                lengths = {int(value) for value in length.split(",")}
            except ValueError:
                lengths = set()
            if len(lengths) > 1:  # (urllib3's response refuses it so)
                from urllib3.exceptions import InvalidHeader

                fp.close()
                raise InvalidHeader(f"Content-Length contained multiple unmatching values ({length})")

    def release_conn(self) -> None:
        if self._pool is not None and self._connection is not None:
            self._pool._put_conn(self._connection)
            self._connection = None

    def close(self) -> None:
        if not self._fp.isclosed():
            self._fp.close()
        if self._connection is not None:
            self._connection.close()


def _compat32():
    from email.policy import compat32

    return compat32


class Head:
    """An answer's headers as urllib3's ``HTTPHeaderDict`` presents them: names without case,
    a repeated header's values joined with ", "."""

    __slots__ = ("_items", "_values")

    def __init__(self, message) -> None:
        # The lines as read: what compat32's items() returns for a head http.client decoded
        # as Latin-1 (no surrogates), without a policy call per header.
        raw = getattr(message, "_headers", None)
        self._items = list(raw) if raw is not None and message.policy is _compat32() else message.items()
        values: dict[str, str] = {}
        for name, value in self._items:
            key = name.lower()
            values[key] = f"{values[key]}, {value}" if key in values else value
        self._values = values

    def get(self, name: str, default=None):
        return self._values.get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return self._values[name.lower()]

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name.lower() in self._values

    def _grouped(self) -> dict[str, list]:
        groups: dict[str, list] = {}
        for name, value in self._items:
            groups.setdefault(name.lower(), [name]).append(value)
        return groups

    def items(self):
        """Every header line, a name's lines together in the order names first came (urllib3's)."""
        return [(group[0], value) for group in self._grouped().values() for value in group[1:]]

    def keys(self):
        """Each name once, as first received."""
        return [group[0] for group in self._grouped().values()]

    def __iter__(self):
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._values)
