"""The connections under requests: urllib3's, with ``PREFETCH_RESOLVE`` and the head deadline.

urllib3 pools (:func:`pool_classes`; :func:`adapter_for` mounts them in requests) whose
connections look the host up in ``PREFETCH_RESOLVE`` first and connect where a stop can cut
the connect short (``net/open_socket.py``), must receive the whole response head within the
read timeout and parse a plain head without the ``email`` package (``net/read_head.py``):
the same as the direct connections (``net/direct_conn.py``), which need no urllib3. An https
request that verifies (directly or through an http proxy's tunnel) uses the direct path's one
TLS context of its bundle (``net/tls_context.py``), not one urllib3 builds and loads the bundle
into for every new connection.

Imported by ``prefetch.net.http`` when a requests session opens (requests and urllib3 load
lazily).
"""

from __future__ import annotations


def adapter_for(resolve: dict[str, str | None]):
    """A requests adapter whose connections honour ``resolve`` and the head deadline."""
    from requests.adapters import HTTPAdapter

    pools = pool_classes(resolve)

    class _Adapter(HTTPAdapter):
        _shared = False  # the request being sent verifies with net/tls_context's one context

        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

        def get_connection_with_tls_context(self, request, verify, proxies=None, cert=None):
            # (a Client, and its session, is one thread's: the flag is this request's)
            self._shared = shares_context(request.url, verify, proxies, cert)
            return super().get_connection_with_tls_context(request, verify, proxies, cert)

        def build_connection_pool_key_attributes(self, request, verify, cert=None):
            host, kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
            if self._shared:
                from prefetch.net.tls_context import context_for

                # The bundle in the one context, loaded once; named to urllib3 as well, it was
                # loaded again into that context by every new connection.
                kwargs = {k: v for k, v in kwargs.items() if k not in ("ca_certs", "ca_cert_dir")}
                kwargs["ssl_context"] = context_for(verify)
            return host, kwargs

        def cert_verify(self, conn, url, verify, cert):
            super().cert_verify(conn, url, verify, cert)  # (its checks: a bundle that is not there)
            if getattr(conn, "conn_kw", {}).get("ssl_context") is not None:
                conn.ca_certs = conn.ca_cert_dir = None  # (requests names the bundle on the pool again)

        def proxy_manager_for(self, proxy, **kwargs):
            manager = super().proxy_manager_for(proxy, **kwargs)
            if hasattr(manager, "pool_classes_by_scheme") and not proxy.lower().startswith("socks"):
                manager.pool_classes_by_scheme = pools
            return manager

    return _Adapter()


def shares_context(url: str, verify, proxies, cert) -> bool:
    """An https request that verifies with ``verify`` and ``net/tls_context``'s one context for it,
    not a context urllib3 builds (and loads the bundle into) for each new connection: directly or
    through an http proxy's tunnel. Not with a client certificate, not unverified, and not
    through an https or SOCKS proxy (left to urllib3 as before), nor where urllib3 would turn
    the context's own host name check off to check it itself (pyOpenSSL, an OpenSSL without
    that check): it sets that on the context it is given, which the direct path shares."""
    if not verify or cert is not None or url[:6].lower() != "https:":
        return False
    from requests.utils import select_proxy
    from urllib3.util import ssl_

    if ssl_.IS_PYOPENSSL or not ssl_.HAS_NEVER_CHECK_COMMON_NAME:
        return False

    proxy = select_proxy(url, proxies)
    return not proxy or proxy[:5].lower() == "http:"


def pool_classes(resolve: dict[str, str | None]) -> dict[str, type]:
    """urllib3 connection pools (by scheme) whose connections honour ``resolve`` and the head deadline."""
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

    conn_classes = _connection_classes()

    class _HTTPPool(HTTPConnectionPool):
        ConnectionCls = conn_classes[0]

        def _new_conn(self):
            conn = super()._new_conn()
            conn.resolve_table = resolve
            return conn

    class _HTTPSPool(HTTPSConnectionPool):
        ConnectionCls = conn_classes[1]

        def _new_conn(self):
            conn = super()._new_conn()
            conn.resolve_table = resolve
            return conn

    return {"http": _HTTPPool, "https": _HTTPSPool}


_CLASSES: list = []


def _connection_classes():
    if _CLASSES:
        return _CLASSES
    import socket
    import sys

    from prefetch.net.open_socket import address_for, connect_watched
    from prefetch.net.read_head import quick_response_class, within_deadline

    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
    from urllib3.util.connection import allowed_gai_family
    from urllib3.util.timeout import _DEFAULT_TIMEOUT

    class _Mixin:
        resolve_table: dict = {}
        response_class = quick_response_class()

        def _new_conn(self):
            # urllib3's own _new_conn, with the socket known to abort_head while it connects. The
            # override is only where to connect: ``_dns_host`` stays the name (urllib3's ``host``
            # reads it, and the Host header and TLS name of every request come from it).
            try:
                where = address_for(self.resolve_table, self._dns_host or "")
                sock = connect_watched(where, self.port, None if self.timeout is _DEFAULT_TIMEOUT else self.timeout,
                                       self.socket_options, allowed_gai_family(), self.source_address,
                                       name=self._dns_host)
            except socket.gaierror as exc:
                raise NameResolutionError(self.host, self, exc) from exc
            except socket.timeout as exc:
                raise ConnectTimeoutError(
                    self, f"Connection to {self.host} timed out. (connect timeout={self.timeout})") from exc
            except OSError as exc:
                raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc
            sys.audit("http.client.connect", self, self.host, self.port)
            return sock

        def getresponse(self):
            deadline = self.timeout if isinstance(self.timeout, (int, float)) else None
            return within_deadline(self.sock, deadline, super().getresponse)

    class _HTTP(_Mixin, HTTPConnection):
        pass

    class _HTTPS(_Mixin, HTTPSConnection):
        pass

    _CLASSES.extend((_HTTP, _HTTPS))
    return _CLASSES
