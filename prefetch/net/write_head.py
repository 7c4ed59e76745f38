"""A direct request's head, byte for byte what urllib3's ``request`` makes http.client write.

``net/direct.py`` writes it whole on its own socket: the request line (the target with what
urllib3 would percent-encode encoded), ``Host`` unless given, ``Accept-Encoding: identity``
unless given, ``Content-Length: 0`` for a method that expects a body, urllib3's
``User-Agent`` unless given, then each header as given; whatever http.client or urllib3
would refuse raises the ValueError (or ``UnicodeEncodeError``, ``InvalidURL``) they raise,
with their words.
"""

from __future__ import annotations

import http.client

_SKIP_HEADER = "@@@SKIP_HEADER@@@"  # urllib3.util.SKIP_HEADER: a value that makes urllib3 leave its header out
_SKIPPABLE = ("accept-encoding", "host", "user-agent")
_NO_BODY = frozenset(("GET", "HEAD", "DELETE", "TRACE", "OPTIONS", "CONNECT"))  # urllib3's: no Content-Length: 0
_TOKEN = frozenset("-!#$%&'*+.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

_heads: dict = {}  # (host, port, scheme, method, header lines) -> the head after its request line


def request_head(method: str, target: str, host: str, port: int, scheme: str, headers: dict[str, str]) -> bytes:
    """The request head (request line, headers, blank line) for ``target`` (a path and query)
    on a connection to ``host``:``port``.

    Raises:
        ValueError: a method, header name or value that urllib3 or http.client refuses.
    """
    for char in method:
        if char not in _TOKEN:
            raise ValueError(f"Method cannot contain non-token characters {method!r} (found at least {char!r})")
    if "[" in target or "]" in target:  # (urllib3 encodes them; the rest of a plain URL it leaves)
        target = target.replace("[", "%5B").replace("]", "%5D")
    target = target or "/"
    match = http.client._contains_disallowed_url_pchar_re.search(target)
    if match:
        raise http.client.InvalidURL(f"URL can't contain control characters. {target!r} "
                                     f"(found at least {match.group()!r})")
    lines = tuple(headers.items())
    key = (host, port, scheme, method, lines)
    rest = _heads.get(key)
    if rest is None:
        rest = _header_block(method, host, port, scheme, lines)
        if len(_heads) > 64:
            _heads.clear()  # (a Range or validator per file: the table stays small)
        _heads[key] = rest
    return b"%s %s HTTP/1.1\r\n%s" % (method.encode("ascii"), target.encode("ascii"), rest)


def _header_block(method: str, host: str, port: int, scheme: str, lines: tuple) -> bytes:
    """The headers http.client's putrequest and putheader write after the request line for
    urllib3's ``request(method, target, headers=...)``, ending with the blank line."""
    names = {(name.decode() if isinstance(name, bytes) else name).lower() for name, _ in lines}
    out = []
    if "host" not in names:
        host = host.rstrip(".")  # (urllib3's connection drops a trailing dot)
        try:
            enc = host.encode("ascii")
        except UnicodeEncodeError:
            enc = host.encode("idna")
        if ":" in host:
            enc = b"[" + enc + b"]"
            strip = getattr(http.client, "_strip_ipv6_iface", None)  # (Python 3.10's http.client keeps a zone)
            if strip is not None:
                enc = strip(enc)
        default = 443 if scheme == "https" else 80
        out.append(_header_line("Host", enc if port == default else f"{enc.decode('ascii')}:{port}"))
    if "accept-encoding" not in names:
        out.append(b"Accept-Encoding: identity")
    if "content-length" not in names and "transfer-encoding" not in names and method.upper() not in _NO_BODY:
        out.append(b"Content-Length: 0")
    if "user-agent" not in names:
        from urllib3.connection import _get_default_user_agent  # (only where a caller removed ours)

        out.append(_header_line("User-Agent", _get_default_user_agent()))
    for name, value in lines:
        if isinstance(value, str) and value == _SKIP_HEADER:
            if (name.decode() if isinstance(name, bytes) else name).lower() not in _SKIPPABLE:
                raise ValueError("urllib3.util.SKIP_HEADER only supports 'Accept-Encoding', 'Host', 'User-Agent'")
            continue
        out.append(_header_line(name, value))
    out.append(b"\r\n")
    return b"\r\n".join(out)


def _header_line(name, value) -> bytes:
    """http.client's ``putheader(name, value)``: its encoding and its checks, its errors."""
    if hasattr(name, "encode"):
        name = name.encode("ascii")
    if not http.client._is_legal_header_name(name):
        raise ValueError("Invalid header name %r" % (name,))
    if hasattr(value, "encode"):
        value = value.encode("latin-1")
    elif isinstance(value, int):
        value = str(value).encode("ascii")
    if http.client._is_illegal_header_value(value):
        raise ValueError("Invalid header value %r" % (value,))
    return name + b": " + value
