"""What requests leaves to us: URL and redirect checks, the proxy and netrc from the environment, the CA bundle.

Used by ``net/http.py`` before any connection: a bad URL, redirect, proxy variable or CA
bundle is one NetworkError line, never a traceback from inside requests.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from prefetch.errors import NetworkError
from prefetch.net import proxies

_PROXY_SCHEMES = ("http", "https")


def check_redirect(source: str, target: str) -> None:
    """Refuse redirects to other schemes and from https down to http."""
    src, dst = urlsplit(source).scheme, urlsplit(target).scheme
    if dst not in ("http", "https"):
        raise NetworkError(f"refused redirect from {source} to {target}: only http(s) is followed")
    if src == "https" and dst == "http":
        raise NetworkError(f"refused redirect from {source} to {target}: https must not fall back to http")



_ACCEPTED: dict[tuple[str, str], str] = {}  # (scheme, netloc) already checked -> the scheme lower-cased


def _check_url(url: str) -> tuple[str, str]:
    """(scheme, netloc) of a URL we can fetch, else NetworkError (before any connection)."""
    try:
        parts = urlsplit(url)
        seen = _ACCEPTED.get((parts.scheme, parts.netloc))
        if seen is not None:  # (what is checked is the scheme and the netloc: a list's URLs share them)
            return seen, parts.netloc
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise NetworkError(f"invalid URL {url}: only http and https are supported")
        if not parts.hostname:
            raise NetworkError(f"invalid URL {url}: no host")
        if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in parts.hostname):
            # e.g. a redirect to "http://bad host/": http.client would raise InvalidURL
            raise NetworkError(f"invalid URL {url}: the host {parts.hostname!r} contains a space or control character")
        parts.port  # noqa: B018 - raises ValueError when out of range
    except ValueError as exc:
        raise NetworkError(f"invalid URL {url}: {exc}") from None
    if len(_ACCEPTED) >= 256:
        _ACCEPTED.clear()
    _ACCEPTED[parts.scheme, parts.netloc] = scheme
    return scheme, parts.netloc


def _proxy_variables() -> bool:
    return any(key.lower().endswith("_proxy") for key in os.environ)


def netrc_named() -> bool:
    """Whether requests' ``get_netrc_auth`` could find a netrc file (``$NETRC``, ``~/.netrc``,
    ``~/_netrc``): when not, it returns None and need not be imported."""
    named = os.environ.get("NETRC")
    if named is not None:
        return True
    for name in ("~/.netrc", "~/_netrc"):
        try:
            if os.path.exists(os.path.expanduser(name)):
                return True
        except KeyError:  # no HOME: requests' lookup gives up too
            return False
    return False


def netrc_path() -> str:
    """The netrc file requests reads: ``$NETRC``, else the first of ``~/.netrc``, ``~/_netrc`` there."""
    named = os.environ.get("NETRC")
    if named is not None:
        return os.path.expanduser(named)
    for name in ("~/.netrc", "~/_netrc"):
        path = os.path.expanduser(name)
        if os.path.exists(path):
            return path
    return os.path.expanduser("~/.netrc")


def _check_proxy(url: str) -> None:
    """Refuse, in one line, a proxy from the environment that requests cannot use."""
    if not _proxy_variables():
        return  # the usual case
    if proxies.no_proxy_names(url):
        return  # no proxy for this host (requests would say so, without a check to fail)
    from requests.utils import get_environ_proxies, select_proxy

    proxy = None
    try:
        proxy = select_proxy(url, get_environ_proxies(url))
        parsed = urlsplit(proxy if proxy and "://" in proxy else "http://" + (proxy or "x"))
        parsed.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:  # e.g. https_proxy='http://[::1': "Invalid IPv6 URL"
        # (the parser's words may quote a piece of a password holding "/", "?" or "#")
        why = "percent-encode a / ? # or @ in the user name or password" if "@" in str(proxy) else exc
        raise NetworkError(f"a *_proxy variable is not a valid URL ({why}); fix or unset it") from None
    if proxy and proxies.misread_scheme(proxy):
        raise NetworkError(f"proxy {proxies.shown_proxy(proxy)} has no scheme (requests cannot read it): "
                           f"write it as http://{proxies.shown_proxy(proxy.strip())} in the *_proxy variable")
    if proxy and urlsplit(proxy if "://" in proxy else "http://" + proxy).scheme.lower() not in _PROXY_SCHEMES:
        raise NetworkError(f"proxy {proxies.shown_proxy(proxy)} is not supported: use an http:// proxy, "
                           f"or unset the *_proxy variables")


def ca_bundle(env=None) -> bool | str:
    """``verify`` for requests: the CA bundle the environment (``env``, else ``os.environ``)
    names, else True (certifi).

    Raises:
        NetworkError: a named bundle does not exist.
    """
    env = os.environ if env is None else env
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        bundle = env.get(name)
        if bundle:
            if not os.path.exists(bundle):
                raise NetworkError(f"cannot use the CA bundle {bundle} named by {name}: no such file or directory")
            return bundle
    return True
