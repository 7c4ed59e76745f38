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
        timeout = self._timeouts.get((connect, read))
        if timeout is None:
            timeout = self._timeouts[(connect, read)] = self._timeout(connect=connect, read=read)
        return pool.urlopen(method, path, body=None, headers=headers, retries=self._no_retries, redirect=False,
                            assert_same_host=False, preload_content=False, decode_content=False,
                            timeout=timeout)

    def close(self) -> None:
        self._last = None
        self.manager.clear()
