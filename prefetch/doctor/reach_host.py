"""How ``prefetch doctor`` reaches a host as ``get`` does: its name (the ``PREFETCH_RESOLVE``
hook first), and the TLS context ``get``'s own connections verify with.

Test hook: ``PREFETCH_RESOLVE="host=IP,other.example=fail,*=fail"`` answers DNS for
those names without asking the resolver (``fail``, ``again``: the name does not resolve; ``*``:
every other name), like ``curl --resolve``. It exists so tests never leave loopback.
"""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Mapping


def resolve(host: str, port: int, *, env: Mapping[str, str], timeout: float) -> str:
    """An IP address for ``host`` (the PREFETCH_RESOLVE hook first).

    Raises:
        OSError: the name does not resolve.
    """
    rules = {}
    for item in env.get("PREFETCH_RESOLVE", "").split(","):
        name, sep, value = item.strip().partition("=")
        if sep:
            rules[name.strip().lower()] = value.strip()
    value = rules.get(host.lower(), rules.get("*"))
    if value is not None:
        if value.lower() in ("fail", "again"):
            raise OSError(f"{host} does not resolve (PREFETCH_RESOLVE)")
        return value
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
        return host
    except OSError:
        pass
    answer: list = []
    error: list = []

    def lookup() -> None:
        try:
            answer.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            error.append(exc)

    thread = threading.Thread(target=lookup, daemon=True)
    thread.start()
    thread.join(timeout)
    if answer:
        return answer[0][4][0]
    if error:
        raise OSError(f"{host} does not resolve: {error[0]}")
    raise OSError(f"no DNS answer for {host} within {timeout:g}s")


def tls_context(env: Mapping[str, str]) -> ssl.SSLContext:
    """The context ``get``'s own connections verify with (``net/tls_context.py``), for the
    bundle ``env`` names (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``, ``SSL_CERT_FILE``, ``SSL_CERT_DIR``).

    Raises:
        ssl.SSLError: no such bundle, or one that cannot be loaded.
    """
    from prefetch.errors import NetworkError
    from prefetch.net.checks import ca_bundle
    from prefetch.net.tls_context import context_for

    try:
        return context_for(ca_bundle(env))
    except NetworkError as exc:
        raise ssl.SSLError(str(exc)) from None
