"""What a failed send means, in prefetch's errors: requests', urllib3's and the socket's exceptions.

``Client.request`` (``net/http.py``) sends through requests or, where requests would add
nothing, on connections of its own (``net/direct.py``: the socket's, http.client's and ssl's
exceptions as they are, a TCP connect's in ``ConnectFailed``); either way a failure becomes one of
ours here: NetworkError (TLS, an invalid URL or header: final), the proxy's failure named
(``net/proxies.py``), or :class:`TransientHTTPError` with its kind (worth retrying).
"""

from __future__ import annotations

import os

from prefetch.errors import OPEN_FILES_ERRNOS, NetworkError, too_many_open_files
from prefetch.net import proxies
from prefetch.net.failures import (
    Failure,
    TransientHTTPError,
    _is_remote_disconnected,
    _root_cause,
    _ssl_reason,
    chain_of,
    describe_error,
    failure_kind,
    spoke_plain_http,
)
from prefetch.net.proxies import hide_proxy_passwords, proxy_for
from prefetch.net.unreachable import connect_error
from prefetch.net.unresolved import lookup_error
from prefetch.net.urls import redact_url


def send_failure(exc: BaseException, url: str, key: tuple[str, str]) -> BaseException | None:
    """Ours for a failed send: NetworkError (TLS, invalid URL), a proxy's failure; None for a
    stale keep-alive connection (worth one more try when it was reused), else a transient one.
    A socket this process may not open (EMFILE, ENFILE) is no network failure: retries would not
    mend it (``too_many_open_files``, final)."""
    if any(isinstance(e, OSError) and e.errno in OPEN_FILES_ERRNOS for e in chain_of(exc)):
        return too_many_open_files(redact_url(url))
    if is_ssl_failure(exc):
        reason = _ssl_reason(exc)
        if "CERTIFICATE_VERIFY_FAILED" in reason or "certificate verify failed" in reason:
            return NetworkError(f"TLS verification failed for {redact_url(url)}{_through(url)}: {reason}")
        host = key[1].rpartition('@')[2]
        if _through(url) and "eof" in reason.lower():
            # (Clash's REJECT rule, a proxy whose upstream connect failed after its 200: the tunnel
            # opened and closed with nothing in it)
            return NetworkError(f"the tunnel to {host}{_through(url)} closed before the TLS handshake: the proxy "
                                f"may block {host}, want a login first, or fail to reach it ({reason})")
        return NetworkError(f"TLS error with {host}{_through(url)}: {reason}{plain_http_hint(reason, url)}")
    if is_invalid_request(exc) or type(exc).__name__ in ("InvalidURL", "InvalidSchema", "MissingSchema",
                                                          "InvalidHeader"):
        # (the URL passed our own checks: through a proxy, the proxy variable is the likelier culprit)
        # (urllib3's words may quote a piece of a proxy variable's password: 2.8 quotes what
        # comes before a backslash in it)
        cause = hide_proxy_passwords(describe_error(exc), os.environ)
        return NetworkError(f"invalid URL {redact_url(url)}{_through(url)}: {cause}")
    root = _root_cause(exc)
    if isinstance(root, (ConnectionResetError, BrokenPipeError)) or _is_remote_disconnected(root):
        return None
    return transient_failure(exc, url, key)


def transient_failure(exc: BaseException, url: str, key: tuple[str, str]) -> BaseException:
    error = _transient(exc, url, key)
    lookup = lookup_error(exc)
    if not isinstance(error, TransientHTTPError):
        return error
    if lookup is not None:  # (net/unresolved.py: no internet?)
        proxy = proxy_for(url)
        name = key[1].rpartition("@")[2] if not proxy else proxy.partition("://")[2].rstrip("/")
        error.unresolved, error.proxy = (name, lookup.errno, lookup.strerror or str(lookup)), proxy
    elif (refused := connect_error(exc)) is not None:  # (net/unreachable.py: a route that is off?)
        proxy = proxy_for(url)
        host, port = _host_port(proxy or url)
        error.unreached, error.proxy = (host, port, refused.errno, refused.strerror or str(refused)), proxy
    return error


def _host_port(url: str) -> tuple[str, int]:
    """(host, port) that a connection for ``url`` (or a proxy's URL) goes to, the port spelled out."""
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"http://{url}")
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.hostname or "", port or (443 if parts.scheme.lower() == "https" else 80)


def _transient(exc: BaseException, url: str, key: tuple[str, str]) -> BaseException:
    cause = describe_error(exc)
    kind = failure_kind(exc)
    if type(exc).__name__ == "ProxyError" and (proxy := proxy_for(url)):
        root = _root_cause(exc)
        if proxy[:8].lower() == "https://" and is_ssl_failure(root):
            return proxies.tls_failed(proxy, url, _ssl_reason(root))
        if proxy[:8].lower() == "https://" and _handshake_timed_out(root):
            return proxies.handshake_timed_out(proxy, url, cause)
        return proxies.connection_failed(proxy, url, cause, kind)
    host = key[1].rpartition("@")[2]  # (the key's netloc may hold ``user:password@``: never shown)
    return TransientHTTPError(f"{host}{_through(url)}: {cause}", cause=cause, kind=kind,
                              timed_out=kind == Failure.TIMEOUT or cause.startswith("timed out"))


def _handshake_timed_out(root: BaseException) -> bool:
    """ssl's "The handshake operation timed out": the TCP connection was taken, TLS was not."""
    return isinstance(root, TimeoutError) and "handshake" in str(root).lower()


def plain_http_hint(reason: str, url: str) -> str:
    """``; ...`` when the TLS error says the other end spoke plain HTTP: an ``https://`` URL for
    an http server."""
    if not spoke_plain_http(reason):
        return ""
    return f"; the server answered in plain HTTP, not TLS: try {'http://' + redact_url(url).partition('://')[2]}"


def _through(url: str) -> str:
    """`` through the proxy P`` when ``url`` goes through one (its tunnel may be what failed:
    a portal's page or a hang-up where the TLS handshake was due), else ``""``."""
    proxy = proxy_for(url)
    return f" through the proxy {proxy}" if proxy else ""


def is_ssl_failure(exc: BaseException) -> bool:
    """A TLS failure: requests' or urllib3's SSLError, ssl's, a certificate mismatch."""
    import ssl

    return isinstance(exc, (ssl.SSLError, ssl.CertificateError)) or type(exc).__name__ == "SSLError"


def is_invalid_request(exc: BaseException) -> bool:
    """urllib3 could not use the URL, or http.client a header (a control character, say)."""
    return type(exc).__name__ in ("LocationParseError", "LocationValueError", "InvalidHeader") or (
        type(exc) is ValueError)
