"""Proxies as users have them (``https_proxy=http://127.0.0.1:7890``, a campus proxy with a password).

requests picks the proxy from ``http_proxy`` / ``https_proxy`` / ``all_proxy`` and
``no_proxy``; this module names it when it is what fails, so a message says "the proxy
refused the credentials" rather than "the server answered 407", and never shows the
password: :func:`proxy_for` returns the proxy without its ``user:password@``.

* a proxy that cannot be reached, or refuses a CONNECT tunnel, is named;
* ``407 Proxy Authentication Required`` is final (retrying does not add credentials);
* a proxy's own error page (tinyproxy's, squid's ``X-Squid-Error``, a 502/503/504
  from a local proxy client) is a failing source with the proxy and the page's title named.
"""

from __future__ import annotations

import os
import re

from prefetch.errors import NetworkError
from prefetch.net.failures import Failure, TransientHTTPError, spoke_plain_http
from prefetch.net.urls import host_of, redact_url

_PROXY_PAGE_STATUSES = {502, 503, 504}
_PROXY_SERVERS = ("proxy", "squid", "tinyproxy", "privoxy", "clash", "v2ray", "polipo", "ccproxy")
_TITLE = rb"<title[^>]*>([^<]{1,120})</title>"  # compiled on first use (re's cache): a proxy's error page only


def no_proxy_names(url: str) -> bool:
    """Whether ``no_proxy`` (else ``NO_PROXY``) lists ``url``'s host exactly (spaces ignored).

    requests' ``should_bypass_proxies`` is then true, whatever the other entries and proxy
    variables say, so ``get_environ_proxies(url)`` is ``{}``: no proxy, and requests need not
    be imported to find that out (about 75 ms of CPU; the test suite and the bench set
    ``NO_PROXY=127.0.0.1,localhost``). Anything less plain (a suffix, a CIDR block, ``*``, a
    URL requests' own parsing would refuse) is left to requests. Reads ``os.environ``, as
    requests does.
    """
    listed = os.environ.get("no_proxy") or os.environ.get("NO_PROXY")
    if not listed:
        return False
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - requests' check reads it (and raises on a bad one) for a named host
        host = parts.hostname
    except ValueError:
        return False
    return bool(host) and host in listed.replace(" ", "").split(",")


def proxy_for(url: str, env=None) -> str | None:
    """The proxy requests will use for ``url`` (credentials removed), or None (direct)."""
    env = os.environ if env is None else env
    if not any(key.lower().endswith("_proxy") and value for key, value in env.items()):
        return None
    if no_proxy_names(url):
        return None  # what requests would find: no proxy for a host no_proxy names
    from requests.utils import get_environ_proxies, select_proxy

    try:
        proxy = select_proxy(url, get_environ_proxies(url))
    except ValueError:
        return None
    if not proxy:
        return None
    return redact_url(re.sub(_CREDENTIALS, lambda m: m.group(1) or "", proxy if "://" in proxy else "http://" + proxy,
                             count=1)).rstrip("/")


def proxy_in(url: str, env) -> str | None:
    """The proxy requests would use for ``url`` were ``env`` its ``os.environ`` (credentials kept), or None.

    For a mapping that is not the process's environment (``prefetch doctor``'s): requests'
    ``get_environ_proxies`` and ``select_proxy`` step by step (lower-case variables preferred,
    ``no_proxy`` before ``NO_PROXY``, CIDR blocks for an address, suffixes and ``host:port`` for a
    name, ``*``), reading ``env`` instead of ``os.environ``.
    """
    if env is os.environ:
        if not any(key.lower().endswith("_proxy") and value for key, value in env.items()):
            return None
        from requests.utils import get_environ_proxies, select_proxy

        try:
            return select_proxy(url, get_environ_proxies(url)) or None
        except ValueError:
            return None
    found = _environ_proxies(env)
    if not found:
        return None
    from urllib.parse import urlparse

    from requests.utils import select_proxy

    try:
        if _bypass(urlparse(url), env.get("no_proxy") or env.get("NO_PROXY"), found):
            return None
        return select_proxy(url, found) or None
    except ValueError:
        return None


def _environ_proxies(env) -> dict[str, str]:
    """urllib's ``getproxies_environment``, reading ``env``: lower-case names win."""
    found: dict[str, str] = {}
    for name, value in env.items():
        if value and name.lower().endswith("_proxy"):
            found[name.lower()[:-6]] = value
    if "REQUEST_METHOD" in env:
        found.pop("http", None)
    for name, value in env.items():
        if name[-6:] == "_proxy":  # (case-sensitive, as urllib: the lower-case spelling wins)
            key = name.lower()[:-6]
            if value:
                found[key] = value
            else:
                found.pop(key, None)
    return found


def _bypass(parsed, no_proxy: str | None, found: dict[str, str]) -> bool:
    """requests' ``should_bypass_proxies`` (then urllib's ``proxy_bypass_environment``)."""
    from urllib.request import proxy_bypass_environment

    from requests.utils import address_in_network, is_ipv4_address, is_valid_cidr

    hostname = parsed.hostname
    if hostname is None:
        return True
    if no_proxy:
        hosts = [host for host in no_proxy.replace(" ", "").split(",") if host]
        if is_ipv4_address(hostname):
            for entry in hosts:
                if is_valid_cidr(entry):
                    if address_in_network(hostname, entry):
                        return True
                elif hostname == entry:
                    return True
        else:
            with_port = hostname + (f":{parsed.port}" if parsed.port else "")
            for entry in hosts:
                entry = entry.lstrip(".")
                if entry in (hostname, with_port):
                    return True
                if hostname.endswith("." + entry) or with_port.endswith("." + entry):
                    return True
    try:
        return bool(proxy_bypass_environment(hostname, found))
    except TypeError:
        return False


# Everything up to the LAST "@" after the scheme: a user name may hold an "@" (an e-mail address)
# and a password a "/", "?" or "#" not percent-encoded; a host never holds an "@".
_CREDENTIALS = r"(?s)^([^/@]*//)?.*@"  # (compiled on first use, by re's cache)


_MISREAD_SCHEME = r"[a-zA-Z][a-zA-Z0-9+-]*:"  # urllib3's parse_url: "proxy.corp:" is a scheme (compiled on first use)


def misread_scheme(value: str) -> bool:
    """Whether requests would read a proxy value with no ``://`` as having a scheme (``proxy.corp:3128``,
    ``alice:pw@proxy:3128``): it then finds no host in it, on every request. ``127.0.0.1:7890`` is read well."""
    return "://" not in value and bool(re.match(_MISREAD_SCHEME, value.strip()))


def shown_proxy(value: str) -> str:
    """A proxy variable's value for messages: ``user:password@`` becomes ``***@`` (even in a malformed URL)."""
    return re.sub(_CREDENTIALS, lambda m: (m.group(1) or "") + "***@", value, count=1)


def hide_proxy_passwords(text: str, env) -> str:
    """``text`` with every proxy variable's value in ``env`` that carries credentials shown as
    :func:`shown_proxy` shows it (an exception's message may quote the variable whole), and
    any piece of its credentials a parser quoted (:func:`credential_patterns`) as ``***``."""
    for name, value in env.items():
        if value and "@" in value and name.lower().endswith("_proxy"):
            text = text.replace(value, shown_proxy(value))
            bare = value.partition("://")[2]
            if bare:
                text = text.replace(bare, shown_proxy(bare))
            text = hide_credentials(text, credential_patterns(value))
    return text


def hide_credentials(text: str, patterns) -> str:
    """``text`` with what each of ``patterns`` (:func:`credential_patterns`) matches as ``***``, in order."""
    for pattern in patterns:
        text = pattern.sub("***", text)
    return text


_QUOTED = "'\""  # a parser's words quote what it could not read: 'alice:Zq7', 'Zq7pw'
# requests' requote_uri: what it leaves unquoted in a URL it sends or quotes (a "\\" becomes %5C)
_REQUOTE_SAFE = "!#$%&'()*+,/:;=?@[]~"


def credential_patterns(value: str) -> list:
    """Where a message may quote the password of the URL ``value``, as compiled patterns to apply
    in order: the password (as written, percent-decoded, as requests quotes it) wherever it stands
    as ``:PASSWORD@`` or in a parser's quotes, whatever its length; and each piece of
    :func:`secret_pieces` only with the neighbours it has in ``value`` (``/Zq7pw@`` of
    ``alice:ab/Zq7pw@``) or those, or as urllib3 names a port it misread (``port=8123)`` of
    ``alice:8123/x@``). Never where the same letters are an ordinary word or a path: a
    password ``data`` leaves ``/data/x.bin`` and ``metadata`` as they are, and does not tell an
    onlooker what it is by the words it hides."""
    from urllib.parse import quote, unquote, urlsplit

    start = value.find("://") + 3 if "://" in value else 0
    end = value.rfind("@")
    passwords = [value[start:end].partition(":")[2] if end > start else ""]
    try:  # (and as urlsplit reads it: up to the host's first "@" when a "/" comes before another)
        passwords.append(urlsplit(value if "://" in value else "http://" + value).password or "")
    except ValueError:
        pass
    forms = [form for password in passwords if password
             for form in (password, unquote(password), quote(password, safe=_REQUOTE_SAFE))]
    spots: list[tuple[str, set[str]]] = [(form, set()) for form in dict.fromkeys(forms)]
    for piece in secret_pieces(value):
        around = set()
        at = value.find(piece, start, end + 1)
        while 0 <= at and at + len(piece) <= end:  # (each place it stands in the credentials)
            around.add((value[at - 1] if at > 0 else "", value[at + len(piece)]))
            at = value.find(piece, at + 1, end + 1)
        spots.append((piece, around))
    patterns = []
    for text, around in spots:
        choices = [("[:" + re.escape(_QUOTED) + "]", "[@" + re.escape(_QUOTED) + "]")]
        for before, after in sorted(around):
            left = f"[{re.escape(before + _QUOTED)}]" if before else None
            choices.append((left, f"[{re.escape(after + _QUOTED)}]"))
        alternatives = [(f"(?<={left})" if left else r"(?<![^\s'\"=])") + re.escape(text) + f"(?={right})"
                        for left, right in dict.fromkeys(choices)]
        alternatives.append(rf"(?<=port=){re.escape(text)}(?=[),])")  # (urllib3's pool, a password read as the port)
        patterns.append(re.compile("|".join(alternatives)))
    return patterns


# Where a URL parser stops reading an authority: urllib3 2.8 quotes "'alice:Zq7' is not a valid
# host or port" for http://alice:Zq7\pw@host (a backslash ends it there, as "/", "?" and "#" do).
_PARSER_CUTS = r"[/?#\\\[\]@\s]"


def secret_pieces(value: str) -> list[str]:
    """What an error message may quote of the credentials in the URL ``value`` (up to its last
    ``@``): ``user:password``, the password, and every piece of them a parser cuts off at a ``/ ?
    # \\ [ ] @`` or a space, of three characters or more; the password's first, longest first. A parser's words
    depend on its version (urllib3 2.7 quoted the URL whole, 2.8 the piece before the cut)."""
    bare = value.partition("://")[2] if "://" in value else value
    userinfo = bare.rpartition("@")[0]
    user, _, password = userinfo.partition(":")
    found: list[str] = []
    for whole in (password, userinfo):  # (the password's pieces first: "alice:Zq7" is shown as "alice:***")
        if not whole:
            continue
        cuts = list(re.finditer(_PARSER_CUTS, whole))
        pieces = {whole, *re.split(_PARSER_CUTS, whole), *(whole[:c.start()] for c in cuts),
                  *(whole[c.end():] for c in cuts)}
        # (a piece of the user name alone, "bob" of bob@example.com, is no secret: what reaches into the password is)
        found += sorted((p for p in pieces if len(p) >= 3 and p not in found
                         and (p in password or ":" in p and len(p) > len(user))), key=len, reverse=True)
    return found


def _credentials_given(url: str) -> bool:
    from requests.utils import get_environ_proxies, select_proxy

    proxy = select_proxy(url, get_environ_proxies(url)) or ""
    return "@" in proxy.partition("://")[2].partition("/")[0]


def auth_required(proxy: str, url: str) -> NetworkError:
    """The error for a 407 from ``proxy`` (final: asking again does not add credentials)."""
    if _credentials_given(url):
        what = f"the proxy {proxy} refused the user name and password in the proxy variable"
    else:
        what = (f"the proxy {proxy} asks for a user name and password (HTTP 407): give them in the proxy variable, "
                f"e.g. {url.partition(':')[0].lower()}_proxy=http://USER:PASSWORD@{host_of(proxy)}")
    return NetworkError(f"{what}; fetching {host_of(url)}")


def tls_failed(proxy: str, url: str, reason: str) -> NetworkError:
    """A TLS failure with an ``https://`` proxy itself (final: asking again meets the same proxy).
    Most often the proxy speaks plain HTTP and its variable says ``https://`` by mistake."""
    if spoke_plain_http(reason):
        return _plain_proxy(proxy, url)
    return NetworkError(f"TLS error with the proxy {proxy}: {reason}; fetching {host_of(url)}")


def _plain_proxy(proxy: str, url: str) -> NetworkError:
    return NetworkError(f"the proxy {proxy} answered in plain HTTP, not TLS: write it as "
                        f"http://{proxy.partition('://')[2]} in the proxy variable; fetching {host_of(url)}")


def handshake_timed_out(proxy: str, url: str, cause: str) -> BaseException:
    """An ``https://`` proxy took the TCP connection but not the TLS handshake in time. squid
    answers a ClientHello in plain HTTP at once (:func:`tls_failed`); tinyproxy reads it as the
    start of a request line and waits for its end, so every try timed out (~32 s of them). A
    plain request to the proxy tells: answered in HTTP, it is an http proxy written as https://
    (final, one line). Answered neither way, the proxy is hung or no proxy at all: final too,
    one line naming it (retries met the same silence for ~32 s; a rerun resumes)."""
    if speaks_plain_http(proxy):
        return _plain_proxy(proxy, url)
    return NetworkError(f"the proxy {proxy} took the connection but did not answer the TLS handshake ({cause}), "
                        f"nor a plain HTTP request: it is hung or not a proxy; check it, or unset the proxy "
                        f"variable; fetching {host_of(url)}")


def speaks_plain_http(proxy: str, timeout: float = 3.0) -> bool:
    """``proxy`` (``scheme://host:port``) answers a plain HTTP request in HTTP. The request is
    to the proxy itself (``GET /``, its own host in ``Host``): nothing is fetched through it."""
    import socket
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(proxy)
        host, port = parts.hostname, parts.port or (443 if parts.scheme.lower() == "https" else 80)
        if not host:
            return False
        with socket.create_connection((host, port), timeout=timeout) as sock:
            name = f"[{host}]" if ":" in host else host
            sock.sendall(f"GET / HTTP/1.0\r\nHost: {name}:{port}\r\n\r\n".encode("ascii"))
            return sock.recv(5) == b"HTTP/"
    except (OSError, ValueError, UnicodeError):
        return False


def connection_failed(proxy: str, url: str, cause: str, kind: str) -> BaseException:
    """A failure to reach ``url`` through ``proxy`` (requests' ProxyError): the proxy is named."""
    if re.search(r"\b40[17]\b", cause):
        return auth_required(proxy, url)
    tunnel = re.search(r"Tunnel connection failed:\s*(.*)", cause)
    if tunnel:
        answer = tunnel.group(1).strip()
        message = f"the proxy {proxy} did not open a tunnel to {host_of(url)} ({answer})"
        code = re.match(r"\d{3}", answer)
        if code and 400 <= int(code.group()) < 500 and int(code.group()) not in (408, 425, 429):
            # its policy (403: this host is blocked), not a moment's trouble: asking again changes nothing
            return NetworkError(f"{message}; use another proxy, --mirror, or no_proxy for {host_of(url)}")
        return TransientHTTPError(message, cause=message, kind=Failure.UNREACHABLE)
    message = f"cannot reach {host_of(url)} through the proxy {proxy}: {cause}"
    return TransientHTTPError(message, cause=message, kind=kind, timed_out=kind == Failure.TIMEOUT)


def proxy_page(resp, proxy: str, url: str) -> BaseException | None:
    """The error for an answer that is the proxy's own (407, an error page), else None."""
    status = resp.status
    if status == 407:
        return auth_required(proxy, url)
    if status < 400:
        return None
    headers = resp.headers
    server = (headers.get("Server") or "").lower()
    own = bool(headers.get("X-Squid-Error") or headers.get("Proxy-Agent")
               or any(name in server for name in _PROXY_SERVERS))
    if not own and status not in _PROXY_PAGE_STATUSES:
        return None
    if status == 401:  # tinyproxy's answer to wrong credentials
        return auth_required(proxy, url)
    from prefetch.net.failures import shown_text

    squid = headers.get("X-Squid-Error")
    detail = shown_text(squid, wire=True) if squid else _title(resp)
    page = f"its own error page ({detail})" if detail else "its own error page"
    message = (f"the proxy {proxy} answered HTTP {status} with {page} instead of {host_of(url)}'s file; "
               f"check that the proxy can reach {host_of(url)}, or use another proxy or --mirror")
    return TransientHTTPError(message, cause=f"proxy answered HTTP {status}", status=status)


def _title(resp) -> str:
    try:
        head = resp.peek(2048)
    except Exception:  # noqa: BLE001 - the title is a courtesy
        return ""
    match = re.search(_TITLE, head, re.I)
    if not match:
        return ""
    from prefetch.net.failures import shown_text

    return shown_text(match.group(1).decode("utf-8", "surrogateescape").strip())  # (a byte not UTF-8: \xff)
