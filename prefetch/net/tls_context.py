"""TLS for the direct connections (``net/direct_conn.py``): requests' verification, without urllib3;
the requests session's https pools take the same context (``net/connection.py``).

What urllib3 2.x builds for requests' ``verify`` (``create_urllib3_context`` and
``ssl_wrap_socket``): a client context at TLS 1.2 or later, no compression, no session
tickets, strict X.509 checks from Python 3.13 on, post-handshake authentication allowed, the certificate required and checked against
the host name (never its common name), the trust store given (the bundle the environment names,
a directory of them as ``capath``, else certifi's: as ``Client`` works it out), ALPN
``http/1.1``, and ``SSLKEYLOGFILE`` honoured. One context per bundle per process: urllib3
loads the bundle again for every connection (requests >= 2.32.3 hands it only the bundle's
path), the store is the same. It is built once even
when a download's first connections all start together (the probe and its preconnects):
loading certifi's bundle is ~30 ms of CPU, and four more loads in threads also kept them
inside OpenSSL while a failed handshake ended the process. ``Client.prepare`` builds it before
the first request's clock starts (``DirectPools.prepare``): inside it, the load counted as the
route's round trip, and a near host's probe looked like a long route's.
"""

from __future__ import annotations

import os
import socket
import ssl
import sys
import threading

_BUILDING = threading.Lock()  # (one build at a time: the others wait for it and take the same context)


def _after_fork() -> None:
    """A forked child's own lock: one held by a parent's thread mid-build would stay held for ever."""
    global _BUILDING
    _BUILDING = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)

_CONTEXTS: dict = {}  # (verify, the bundle's mtime and size, SSLKEYLOGFILE) -> SSLContext


def context_for(verify: bool | str) -> ssl.SSLContext:
    """The context verifying with ``verify`` (True: certifi's bundle; a path: that file, or
    that directory as ``capath``).

    Raises:
        ssl.SSLError: the bundle cannot be loaded (urllib3 raises its SSLError so).
    """
    where = verify
    if verify is True:
        import certifi

        where = certifi.where()
    try:
        found = os.stat(where)
        stamp = (found.st_mtime_ns, found.st_size)
    except OSError:
        stamp = None
    key = (where, stamp, os.environ.get("SSLKEYLOGFILE"))
    context = _CONTEXTS.get(key)
    if context is None:
        with _BUILDING:
            context = _CONTEXTS.get(key)
            if context is None:
                context = _CONTEXTS[key] = _build(where)
    return context


def _build(where: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_SSLv2 | ssl.OP_NO_SSLv3 | ssl.OP_NO_COMPRESSION | ssl.OP_NO_TICKET
    if sys.version_info >= (3, 13):  # (as ssl.create_default_context there, and urllib3 with it)
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
    if getattr(context, "post_handshake_auth", None) is not None:
        context.post_handshake_auth = True
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = True
    context.hostname_checks_common_name = False
    keylog = os.environ.get("SSLKEYLOGFILE")
    if keylog and os.path.expandvars(keylog):
        context.keylog_filename = os.path.expandvars(keylog)
    try:
        if os.path.isdir(where):
            context.load_verify_locations(capath=where)
        else:
            context.load_verify_locations(cafile=where)
    except OSError as exc:
        raise ssl.SSLError(exc) from exc
    context.set_alpn_protocols(["http/1.1"])
    return context


def server_name(host: str) -> str:
    """The name the certificate must carry (and SNI sends, unless an address): ``host``
    without a trailing dot, an IPv6 address without its brackets and zone (as urllib3)."""
    name = host.rstrip(".")
    bare = name.strip("[]")
    if "%" in bare:
        bare = bare[: bare.rfind("%")]
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, bare)
            return bare
        except (OSError, ValueError):
            pass
    return name
