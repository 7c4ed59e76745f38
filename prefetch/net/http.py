"""HTTP for prefetch, on ``requests``: one :class:`Client` per worker thread.

requests (imported lazily: ``--help`` and ``status`` never load it) does the
connection pool and keep-alive, proxies from ``http_proxy`` / ``https_proxy`` /
``all_proxy`` with ``no_proxy``, proxy authentication, CONNECT tunnels, IDNA
hosts, URL quoting, cookies and separate connect / read timeouts per request. A
request that needs none of that (no proxy, no netrc or URL credentials, no cookie,
a URL with nothing to quote) goes out on connections of our own (``net/direct.py``),
without importing requests or urllib3. This module adds what a downloader needs on top:

* bodies are read with :meth:`Response.readinto` (``net/response.py``) into the caller's reused buffer,
  one receive at a time (a slow connection reports progress as bytes trickle in),
  straight from the connection, never as ``bytes`` objects per read;
* TLS is always verified: the bundle named by ``REQUESTS_CA_BUNDLE`` /
  ``CURL_CA_BUNDLE``, else OpenSSL's ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else
  certifi's (requests' default); an empty variable never turns verification off;
* redirects are followed here (:func:`follow_redirects`), never https -> http;
* a reused keep-alive connection that the server closed meanwhile is retried
  once on a fresh one;
* the whole response head must arrive within the read timeout, and
  ``PREFETCH_RESOLVE`` overrides name resolution where connections are made
  (``net/read_head.py``, ``net/open_socket.py``; under requests by ``net/connection.py``);
* every failure has a ``kind`` (:class:`Failure`) that the retry policy reads;
* every failure maps to ours (``net/send_errors.py``): :class:`TransientHTTPError`
  (worth retrying) or ``NetworkError`` / ``HTTPStatusError`` (final); requests', urllib3's,
  http.client's and the socket's exceptions never leave.
"""

from __future__ import annotations

from urllib.parse import urljoin

from prefetch.errors import HTTPStatusError, NetworkError
from prefetch.model.lean import dataclass
from prefetch.net.failures import TransientHTTPError, parse_retry_after
from prefetch.net import proxies
from prefetch.net.local import is_file_url, open_local
from prefetch.net.response import Response
from prefetch.net.proxies import proxy_for
from prefetch.net.send_errors import send_failure, transient_failure
from prefetch.net.urls import host_of, redact_url
from prefetch.net.checks import (
    _check_proxy,
    _check_url,
    _proxy_variables,
    ca_bundle,
    check_redirect,
    netrc_named,
    netrc_path,
)

USER_AGENT = "prefetch/0.1 (+resumable dataset downloader)"
MAX_REDIRECTS = 10
# Statuses worth retrying; everything else >= 400 is final (404 stays 404).
TRANSIENT_STATUSES = {408, 425, 429, 500, 502, 503, 504, 507, 509, 520, 521, 522, 523, 524}
_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass(frozen=True)
class Timeouts:
    """Connect and read timeouts in seconds; the read timeout also bounds the whole response head."""

    connect: float = 10.0
    read: float = 15.0


class Client:
    """One worker's HTTP: connections of our own where requests would add nothing (``net/direct.py``),
    else a requests ``Session``; and what it knows: which hosts have a warm connection.

    Not thread-safe: give each worker thread its own.
    """

    def __init__(self, *, timeouts: Timeouts | None = None, resolve: dict[str, str | None] | None = None) -> None:
        self.timeouts = timeouts or Timeouts()
        self.resolve = resolve  # PREFETCH_RESOLVE's table; None: read it from os.environ
        self._session = None
        self._direct = None  # net.direct.DirectPools
        self._verify: bool | str | None = None
        self._warm: set[tuple[str, str]] = set()  # (scheme, netloc) whose last response was read whole
        self._env: dict[tuple[str, str], tuple[dict, object]] = {}  # (scheme, netloc) -> (proxies, netrc auth)

    def _open(self, direct: bool):
        """The direct pools (``direct``) or the requests session, opened on first use."""
        if direct:
            if self._direct is None:
                from prefetch.net.direct import DirectPools

                self._direct = DirectPools(self._resolve_table(), self._ca_bundle())
            return self._direct
        return self._session or self._open_session()

    def _resolve_table(self):
        from prefetch.net.open_socket import resolve_overrides

        return self.resolve if self.resolve is not None else resolve_overrides()

    def _ca_bundle(self):
        if self._verify is None:
            self._verify = ca_bundle()
        return self._verify

    def _open_session(self):
        import requests

        session = requests.Session()
        # The environment (proxies, no_proxy, ~/.netrc) is read once per host by _environment,
        # not by requests on every request (a quarter of a small file's CPU).
        session.trust_env = False
        from prefetch.net.connection import adapter_for

        adapter = adapter_for(self._resolve_table())
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        session.headers.update(_HEADERS)
        self._ca_bundle()
        self._session = session
        return session

    def _route(self, url: str):
        """(scheme and netloc, proxies, netrc credentials, direct) for ``url``: direct when
        requests would add nothing to the request (``net/direct.py``)."""
        from prefetch.net.direct import plain_url

        if self._last_url[0] != url:  # (prepare() then request(): the URL's checks once)
            self._last_url = (url, _check_url(url), plain_url(url))
        key, plain = self._last_url[1:]
        via, netrc_auth = self._env.get(key) or self._environment(url, key)
        direct = not via and netrc_auth is None and not (self._session is not None and self._session.cookies) \
            and plain
        return key, via, netrc_auth, direct

    _last_url: tuple = (None, None, False)  # (url, its (scheme, netloc), plain_url(url)) of the last _route

    def request(self, url: str, *, headers: dict[str, str] | None = None, method: str = "GET",
                timeouts: Timeouts | None = None) -> Response:
        """Send one request (no redirects followed) and return the response's head.

        Raises:
            TransientHTTPError: connection trouble worth retrying.
            NetworkError: TLS verification failed, invalid URL, unsupported proxy.
        """
        if is_file_url(url):  # a local origin: answered like a Range server (net/local.py)
            return open_local(url, headers=headers, method=method)
        timeouts = timeouts or self.timeouts
        key, via, netrc_auth, direct = self._route(url)
        opened = self._open(direct)
        for attempt in (1, 2):
            reused = key in self._warm
            self._warm.discard(key)
            try:
                if direct:
                    from prefetch.net.direct import merged_headers

                    raw = opened.send(method, url, merged_headers(_HEADERS, headers), timeouts.connect, timeouts.read)
                else:
                    # Plain http, direct: no TLS, and requests would stat a named CA bundle per request for nothing.
                    verify = self._verify if (via or key[0] == "https") else True
                    raw = opened.request(method, url, headers=headers, stream=True, allow_redirects=False,
                                         timeout=(timeouts.connect, timeouts.read), verify=verify,
                                         auth=_explicit_auth(headers) or netrc_auth, proxies=via).raw
            except (OSError, ValueError, *_direct_errors(direct)) as exc:  # requests' errors are OSErrors
                problem = send_failure(exc, url, key)
                if problem is None and reused and attempt == 1:
                    continue  # the server closed the idle keep-alive connection: once more, fresh
                raise (problem or transient_failure(exc, url, key)) from None
            if direct and "Set-Cookie" in raw.headers:
                self._keep_cookies(url, raw)
            answer = Response(raw, url, lambda complete, key=key: self._done(key, complete))
            if answer.status >= 400 and (proxy := proxy_for(url)) and (problem := proxies.proxy_page(answer, proxy, url)):
                answer.close()
                raise problem  # the proxy's own answer (407, its error page): the proxy is named
            return answer
        raise AssertionError("unreachable")

    def _keep_cookies(self, url: str, raw) -> None:
        """A cookie from a direct answer goes into requests' jar; the jar, once not empty, sends
        every later request of this client through requests (which sends it back as it would)."""
        import requests
        from requests.cookies import extract_cookies_to_jar

        session = self._session or self._open_session()
        extract_cookies_to_jar(session.cookies, requests.Request("GET", url).prepare(), raw)

    def _environment(self, url: str, key: tuple[str, str]) -> tuple[dict, object]:
        """What requests' ``trust_env`` would read for this host, read once per client and host.

        The proxy (``*_proxy`` with ``no_proxy``; one that cannot be used refused here) and
        the ``~/.netrc`` (or ``$NETRC``) credentials for the host; both depend on the scheme,
        host and port only. requests prefers the netrc entry to credentials in the URL, as here.
        Without proxy variables (or with the host named in ``no_proxy``) or a netrc file,
        requests is not imported to find that out.
        """
        _check_proxy(url)
        via: dict = {}
        if _proxy_variables() and not proxies.no_proxy_names(url):
            from requests.utils import get_environ_proxies

            via = dict(get_environ_proxies(url))
        auth = None
        if netrc_named():
            import os

            from requests.utils import get_netrc_auth

            from prefetch.fs.safefs import open_readable

            try:  # (requests opens it blocking: a FIFO there would never answer)
                os.close(open_readable(netrc_path()))
            except OSError:
                pass  # absent or unreadable: requests' lookup skips it too
            try:
                auth = get_netrc_auth(url)
            except ValueError as exc:  # not UTF-8: requests ignores a netrc it cannot parse, not this
                # (the exception quotes the file's bytes, passwords and all: never shown)
                raise NetworkError(f"cannot read the netrc file {netrc_path()}: {type(exc).__name__} "
                                   "(not UTF-8 text?); fix or remove it") from None
        found = self._env[key] = (via, auth)
        return found

    def _done(self, key: tuple[str, str], complete: bool) -> None:
        if complete:
            self._warm.add(key)

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
        if self._direct is not None:
            self._direct.close()
        self._warm.clear()

    def connect(self, url: str) -> bool:
        """Open a connection to ``url``'s host now (TCP, and TLS for https), sending nothing:
        this client's next request there goes out on it at once (``engine/preconnect.py``).

        Only where that request would go out directly (``net/direct.py``): through a proxy (or with
        credentials or cookies for requests to send) nothing is done and False returned.

        Raises:
            TransientHTTPError / NetworkError: as a request's connect would.
        """
        if is_file_url(url):
            return False
        key, _via, _auth, direct = self._route(url)
        if not direct:
            return False
        try:
            self._open(True).connect(url, self.timeouts.connect)
        except (OSError, ValueError, *_direct_errors(True)) as exc:
            raise (send_failure(exc, url, key) or transient_failure(exc, url, key)) from None
        self._warm.add(key)  # idle until used: one the server closed meanwhile is retried once, fresh
        return True

    def prepare(self, url: str) -> None:
        """Import what the request needs and open it now, before a request whose latency is timed
        (the first one would otherwise count 0.1-0.4 s of imports as network)."""
        if is_file_url(url):
            return
        _, via, _, direct = self._route(url)
        pools = self._open(direct)
        if direct:
            pools.prepare(url)  # (the TLS context too: loading the trust store is no round trip)
        else:
            from prefetch.net.connection import shares_context

            if shares_context(url, self._verify, via, None):  # (the session's pools take the same context)
                from prefetch.net.tls_context import context_for

                try:  # (a warm-up only, as DirectPools.prepare: a bundle that cannot be loaded
                    context_for(self._verify)  # is the request's own TLS error, exit 3)
                except OSError:  # (ssl.SSLError: "no certificate or crl found")
                    pass

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_HEADERS = {
    "User-Agent": USER_AGENT,
    # Ask for the file's own bytes: a compressed body would not match byte offsets.
    "Accept-Encoding": "identity",
}


def _direct_errors(direct: bool) -> tuple[type, ...]:
    """http.client's base exception (a bad status line, a line too long), which a direct
    request raises as it is (requests wraps it in an OSError)."""
    if not direct:
        return ()
    from http.client import HTTPException

    return (HTTPException,)


_CREDENTIAL_HEADERS = {"authorization", "cookie", "proxy-authorization"}


def _keep_headers(request):
    return request


def _explicit_auth(headers: dict[str, str] | None):
    """requests replaces an Authorization header with ~/.netrc's entry for the host; one given
    with --header wins instead (as in curl): a no-op auth keeps requests from looking at netrc."""
    if headers and any(k.lower() == "authorization" for k in headers):
        return _keep_headers
    return None  # requests then reads credentials from the URL, else ~/.netrc (or $NETRC)


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
            raise NetworkError(f"{redact_url(current)} answered {resp.status} without a Location")
        target = urljoin(current, location)
        check_redirect(current, target)
        if headers and host_of(target) != host_of(current):
            # As requests and curl: credentials given for one host are not sent to another
            # (requests' own netrc lookup then applies to the new host).
            headers = {k: v for k, v in headers.items() if k.lower() not in _CREDENTIAL_HEADERS}
        current = target
    raise NetworkError(f"too many redirects (more than {MAX_REDIRECTS}) starting at {redact_url(url)}")


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
        raise HTTPStatusError(f"{redact_url(current)} answered HTTP {status}; check the URL or the mirror",
                              status=status)
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
