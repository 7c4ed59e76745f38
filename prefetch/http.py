"""HTTP/1.1 for prefetch, on the standard library's ``http.client``.

Why not requests: a download is one request per segment and then a loop that
moves bytes from a socket to a file. ``requests`` costs ~80 ms to import (a
quarter of a 200 MiB loopback download) and hands out ``bytes`` objects per
read; here a worker reads with ``readinto`` into one reused buffer and writes
that buffer with ``pwrite``: one copy in, one copy out, as curl does.

What this module keeps from a full client, because downloads need it:

* keep-alive: a :class:`Client` (one per worker thread) keeps one connection per
  host and reuses it for the next segment; a reused connection that the server
  closed meanwhile is retried once on a fresh one;
* TLS always verified: certifi's CA bundle (as requests), or the bundle named by
  ``REQUESTS_CA_BUNDLE`` / ``CURL_CA_BUNDLE``, or OpenSSL's ``SSL_CERT_FILE`` /
  ``SSL_CERT_DIR``; an empty variable never turns verification off;
* proxies from ``http_proxy`` / ``https_proxy`` / ``all_proxy`` / ``no_proxy``
  (http:// proxies, with user:password; https targets go through CONNECT);
* separate connect and read timeouts; redirects followed by :func:`open_url`
  (never https -> http, never to another scheme);
* every failure mapped to ours: :class:`TransientHTTPError` (worth retrying) or
  ``NetworkError`` / ``HTTPStatusError`` (final).
"""

from __future__ import annotations

import base64
import email.utils
import os
import threading
import time
from dataclasses import dataclass
from urllib.parse import quote, unquote, urljoin, urlsplit

from prefetch.errors import HTTPStatusError, NetworkError

USER_AGENT = "prefetch/0.1 (+resumable dataset downloader)"
MAX_REDIRECTS = 10
# Statuses worth retrying; everything else >= 400 is final (404 stays 404).
TRANSIENT_STATUSES = {408, 425, 429, 500, 502, 503, 504, 507, 509, 520, 521, 522, 523, 524}
_REDIRECTS = (301, 302, 303, 307, 308)
# Characters left as they are when a URL's path is re-quoted (RFC 3986 reserved,
# unreserved and '%', so an already quoted URL is unchanged).
_SAFE_PATH = "/%:@!$&'()*+,;=-._~"
_SAFE_QUERY = _SAFE_PATH + "?"


@dataclass(frozen=True)
class Timeouts:
    """Connect and read timeouts in seconds."""

    connect: float = 15.0
    read: float = 30.0


class TransientHTTPError(Exception):
    """A failure worth retrying (connection reset, timeout, 5xx, 429).

    ``str()`` names the host; ``cause`` is the failure alone ("Connection refused",
    "timed out", "HTTP 503"), for a table that already names the host.
    """

    def __init__(self, message: str, *, cause: str | None = None, retry_after: float | None = None,
                 status: int | None = None, timed_out: bool = False) -> None:
        super().__init__(message)
        self.cause = cause or message
        self.retry_after = retry_after
        self.status = status
        self.timed_out = timed_out


class Response:
    """One response; its body is read with :meth:`readinto` / :meth:`read`.

    ``status`` and ``headers`` (case-insensitive ``.get``) as http.client gives
    them; ``url`` is the URL that answered.
    """

    def __init__(self, raw, conn, url: str) -> None:
        self._raw = raw
        self._conn = conn
        self.url = url
        self.status: int = raw.status
        self.headers = raw.headers

    def readinto(self, buffer) -> int:
        """Read what has arrived (at most ``len(buffer)`` bytes) into ``buffer``; 0 at the end.

        Like ``read1``: one receive, not a loop until the buffer is full, so a
        slow connection still reports progress (and stalls) as bytes trickle in.
        """
        raw = self._raw
        if raw.fp is None:
            return 0
        if raw.chunked:
            return raw.readinto(buffer)  # http.client decodes the chunks
        if raw.length is None:  # the body ends when the server closes the connection
            n = raw.fp.readinto1(buffer)
            if not n:
                raw.close()
            return n
        if not raw.length:
            raw.close()
            return 0
        if len(buffer) > raw.length:
            buffer = memoryview(buffer)[: raw.length]
        n = raw.fp.readinto1(buffer)
        if not n:
            import http.client

            missing = raw.length
            raw.close()
            raise http.client.IncompleteRead(b"", missing)
        raw.length -= n
        if not raw.length:
            raw.close()  # the whole body is read: the connection can serve the next request
        return n

    def read(self, amount: int | None = None) -> bytes:
        return self._raw.read(amount)

    def text(self) -> str:
        """The whole body decoded (the Content-Type charset, else UTF-8)."""
        charset = self.headers.get_content_charset() or "utf-8"
        try:
            return self.read().decode(charset, errors="replace")
        except LookupError:
            return self.read().decode("utf-8", errors="replace")

    def close(self) -> None:
        """Done with the body. An unread rest closes the connection (it cannot be reused)."""
        if not self._raw.isclosed():
            self._raw.close()
            self._conn.close()

    def abort(self) -> None:
        """Shut the socket down so a thread blocked reading this response wakes up."""
        import socket

        for sock in (self._conn.sock, _response_socket(self._raw)):
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _response_socket(raw):
    try:
        return raw.fp.raw._sock  # BufferedReader -> SocketIO -> socket
    except AttributeError:
        return None


class Client:
    """Sends requests and keeps one connection per (scheme, host, port, proxy).

    Not thread-safe: give each worker thread its own.
    """

    def __init__(self, *, timeouts: Timeouts | None = None) -> None:
        self.timeouts = timeouts or Timeouts()
        self._connections: dict[tuple, object] = {}

    def request(self, url: str, *, headers: dict[str, str] | None = None, method: str = "GET",
                timeouts: Timeouts | None = None) -> Response:
        """Send one request (no redirects followed) and return the response's head.

        Raises:
            TransientHTTPError: connection trouble worth retrying.
            NetworkError: TLS verification failed, invalid URL, unsupported proxy.
        """
        import http.client
        import ssl

        timeouts = timeouts or self.timeouts
        target = _Target.parse(url)
        key = (target.scheme, target.host, target.port, target.proxy)
        all_headers = {
            "User-Agent": USER_AGENT,
            # Ask for the file's own bytes: a compressed body would not match byte offsets.
            "Accept-Encoding": "identity",
            **target.auth_headers,
            **(headers or {}),
        }
        if not any(k.lower() == "authorization" for k in all_headers):
            # Like requests and curl --netrc-optional: ~/.netrc (or $NETRC) when no auth is given.
            auth = netrc_auth(target.host)
            if auth is not None:
                all_headers["Authorization"] = auth
        for attempt in (1, 2):
            conn = self._connections.get(key)
            if conn is None:
                conn = self._connections[key] = target.connection()
            reused = conn.sock is not None
            try:
                if not reused:
                    conn.timeout = timeouts.connect  # connecting and the TLS handshake
                    conn.connect()
                conn.sock.settimeout(timeouts.read)  # then each receive, for this request
                conn.request(method, target.request_target, headers=all_headers)
                return Response(conn.getresponse(), conn, url)
            except ssl.SSLCertVerificationError as exc:
                conn.close()
                raise NetworkError(f"TLS verification failed for {url}: {_ssl_reason(exc)}") from None
            except ssl.SSLError as exc:
                conn.close()
                raise NetworkError(f"TLS error with {target.netloc}: {_ssl_reason(exc)}") from None
            except http.client.InvalidURL as exc:
                conn.close()
                raise NetworkError(f"invalid URL {url}: {exc}") from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                stale = isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError))
                if reused and stale and attempt == 1:
                    continue  # the server closed the idle keep-alive connection: once more, fresh
                cause = describe_error(exc)
                raise TransientHTTPError(f"{target.netloc}: {cause}", cause=cause,
                                         timed_out=isinstance(exc, TimeoutError)) from None
        raise AssertionError("unreachable")

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def follow_redirects(client: Client, url: str, *, headers: dict[str, str] | None = None,
                     timeouts: Timeouts | None = None, method: str = "GET") -> tuple[Response, str]:
    """Send a request and follow redirects (never https -> http); any final status is returned.

    Returns:
        (response, final_url). The caller reads the body and closes the response.
    Raises:
        TransientHTTPError (connection trouble), NetworkError (refused redirect, TLS, bad URL).
    """
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        resp = client.request(current, headers=headers, method=method, timeouts=timeouts)
        if resp.status not in _REDIRECTS:
            return resp, current
        location = resp.headers.get("Location")
        _discard(resp)
        if not location:
            raise NetworkError(f"{current} answered {resp.status} without a Location")
        target = urljoin(current, location)
        check_redirect(current, target)
        if headers and host_of(target) != host_of(current):
            # As requests and curl: credentials given for one host are not sent to another.
            headers = {k: v for k, v in headers.items() if k.lower() not in _CREDENTIAL_HEADERS}
        current = target
    raise NetworkError(f"too many redirects (more than {MAX_REDIRECTS}) starting at {url}")


def open_url(client: Client, url: str, *, headers: dict[str, str] | None = None, timeouts: Timeouts | None = None,
             method: str = "GET") -> tuple[Response, str]:
    """:func:`follow_redirects`, with error statuses raised (416 is the caller's to read).

    Raises:
        TransientHTTPError: worth retrying (connection trouble, 429, 5xx).
        HTTPStatusError / NetworkError: final.
    """
    resp, current = follow_redirects(client, url, headers=headers, timeouts=timeouts, method=method)
    if resp.status >= 400 and resp.status != 416:
        status = resp.status
        retry_after = parse_retry_after(resp.headers.get("Retry-After"))
        _discard(resp)
        if status in TRANSIENT_STATUSES:
            raise TransientHTTPError(f"{host_of(current)} answered HTTP {status}", cause=f"HTTP {status}",
                                     retry_after=retry_after, status=status)
        raise HTTPStatusError(f"{current} answered HTTP {status}; check the URL or the mirror", status=status)
    return resp, current


def _discard(resp: Response) -> None:
    """Close a response we do not want, keeping the connection when its body is short."""
    length = resp.headers.get("Content-Length")
    if length and length.isdigit() and int(length) <= 64 << 10:
        try:
            resp.read()
        except Exception:  # noqa: BLE001 - close() below drops the connection instead
            pass
    resp.close()


def check_redirect(source: str, target: str) -> None:
    """Refuse redirects to other schemes and from https down to http."""
    src, dst = urlsplit(source).scheme, urlsplit(target).scheme
    if dst not in ("http", "https"):
        raise NetworkError(f"refused redirect from {source} to {target}: only http(s) is followed")
    if src == "https" and dst == "http":
        raise NetworkError(f"refused redirect from {source} to {target}: https must not fall back to http")


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def describe_error(exc: BaseException) -> str:
    """The short cause of a connection failure ("Connection refused"), for one line."""
    import http.client
    import socket

    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"name lookup failed ({exc.strerror or exc})"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(exc, http.client.IncompleteRead):
        return f"the server closed the connection with {exc.expected} more bytes announced"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc) or type(exc).__name__
    return text if len(text) < 160 else text[:157] + "..."


def host_of(url: str) -> str:
    """``host[:port]`` of a URL, for messages."""
    return urlsplit(url).netloc or url


def _ssl_reason(exc: BaseException) -> str:
    text = getattr(exc, "verify_message", None)
    reason = str(exc)
    if text and text not in reason:
        reason = f"{reason} ({text})"
    return reason if len(reason) < 300 else reason[:297] + "..."


# ---------------------------------------------------------------------------
# URLs, proxies, connections


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str  # IDNA-encoded, without brackets
    port: int
    netloc: str  # for messages
    request_target: str  # path?query, or the absolute URL through an http proxy
    proxy: tuple[str, int] | None
    proxy_auth: str | None
    auth_headers: dict

    @classmethod
    def parse(cls, url: str) -> "_Target":
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise NetworkError(f"invalid URL {url}: only http and https are supported")
        try:
            host = parts.hostname
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError as exc:
            raise NetworkError(f"invalid URL {url}: {exc}") from None
        if not host:
            raise NetworkError(f"invalid URL {url}: no host")
        try:
            host = host.encode("idna").decode("ascii") if not host.isascii() else host
        except UnicodeError:
            raise NetworkError(f"invalid URL {url}: the host name cannot be encoded") from None
        path = quote(parts.path or "/", safe=_SAFE_PATH)
        if parts.query:
            path += "?" + quote(parts.query, safe=_SAFE_QUERY)
        auth = {}
        if parts.username is not None:
            auth["Authorization"] = _basic(unquote(parts.username), unquote(parts.password or ""))
        proxy_url = _proxy_for(scheme, host, port)
        proxy = proxy_auth = None
        if proxy_url:
            p = urlsplit(proxy_url if "://" in proxy_url else "http://" + proxy_url)
            if p.scheme.lower() != "http" or not p.hostname:
                raise NetworkError(
                    f"proxy {proxy_url} is not supported: use an http:// proxy, or unset the *_proxy variables"
                )
            proxy = (p.hostname, p.port or 80)
            if p.username is not None:
                proxy_auth = _basic(unquote(p.username), unquote(p.password or ""))
        netloc = f"[{host}]" if ":" in host else host
        netloc = netloc if parts.port is None else f"{netloc}:{port}"
        if proxy and scheme == "http":
            # A plain-http request through a proxy names the whole URL.
            path = f"http://{netloc}{path}"
            if proxy_auth:
                auth["Proxy-Authorization"] = proxy_auth
        return cls(scheme, host, port, netloc, path, proxy, proxy_auth, auth)

    def connection(self):
        """A new, not yet connected, connection to the host or its proxy."""
        import http.client

        host, port = self.proxy or (self.host, self.port)
        if self.scheme == "http":
            return http.client.HTTPConnection(host, port)
        conn = http.client.HTTPSConnection(host, port, context=ssl_context())
        if self.proxy:
            tunnel_headers = {"Proxy-Authorization": self.proxy_auth} if self.proxy_auth else None
            conn.set_tunnel(self.host, self.port, headers=tunnel_headers)
        return conn


_CREDENTIAL_HEADERS = {"authorization", "cookie", "proxy-authorization"}


def netrc_auth(host: str) -> str | None:
    """A Basic ``Authorization`` value for ``host`` from ``$NETRC`` or ``~/.netrc``, if it has one.

    An unreadable or malformed file counts as no file (as in requests).
    """
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    if not os.path.isfile(path):
        return None
    import netrc

    try:
        found = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return None
    if not found:
        return None
    login, _account, password = found
    return _basic(login or "", password or "")


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _proxy_for(scheme: str, host: str, port: int) -> str | None:
    """The proxy URL the environment asks for (requests' and curl's rules), or None."""
    if not any(key.lower().endswith("_proxy") for key in os.environ):
        return None  # the usual case, without importing urllib.request
    import urllib.request

    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy:
        return None
    if urllib.request.proxy_bypass_environment(host, proxies) or \
            urllib.request.proxy_bypass_environment(f"{host}:{port}", proxies):
        return None
    return proxy


_SSL_CONTEXT = None
_LOCK = threading.Lock()


def ssl_context():
    """The process's TLS context: verification on, CA bundle chosen as the module doc says."""
    global _SSL_CONTEXT
    with _LOCK:
        if _SSL_CONTEXT is None:
            _SSL_CONTEXT = _make_ssl_context()
        return _SSL_CONTEXT


def _make_ssl_context():
    import ssl

    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        bundle = os.environ.get(name)
        if bundle:
            try:
                if os.path.isdir(bundle):
                    return ssl.create_default_context(capath=bundle)
                return ssl.create_default_context(cafile=bundle)
            except (OSError, ssl.SSLError) as exc:
                raise NetworkError(f"cannot use the CA bundle {bundle} named by {name}: {exc}") from None
    if os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context()  # OpenSSL reads both variables itself
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())
