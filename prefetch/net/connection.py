"""Where connections are made: ``PREFETCH_RESOLVE`` and a deadline on the response head.

urllib3 pools (:func:`pool_classes`; :func:`adapter_for` mounts them in requests) whose connections

* look the host up in ``PREFETCH_RESOLVE`` first (``host=address`` pairs, like
  curl's ``--resolve``; ``host=fail`` makes the name fail to resolve, which is how
  the tests simulate a DNS failure; ``*`` is every other name: the same hook as
  ``prefetch doctor``'s), and
* must receive the whole response head (status line and headers) within the read
  timeout: the read timeout alone is per receive, so a server sending its head a
  byte a second would hold a worker for ever. The deadline shuts the socket down
  and the read ends in :class:`HeadTimeout`;
* parse a head of plain ``Name: value`` lines without the ``email`` package
  (:func:`_quick_response_class`): the same ``HTTPMessage`` http.client would build, at a
  fifth of the cost (a list of thousands of small files parses thousands of heads);
  anything else (a folded line, a stray CR, a multipart type) goes to http.client's parser.

A thread's socket is known from the moment it starts connecting until the response head
is in (:func:`abort_head`), so a stop on a thread that runs its request itself ends a
connect to a host that has stopped answering handshakes too, not after the connect timeout.

Imported by ``prefetch.net.http`` and ``prefetch.net.direct`` when a client opens (requests and
urllib3 load lazily).
"""

from __future__ import annotations

import os


class HeadTimeout(TimeoutError):
    """The response head did not arrive whole within the deadline."""


def resolve_overrides(env=None) -> dict[str, str | None]:
    """``PREFETCH_RESOLVE``: ``host=address`` pairs (comma- or space-separated); ``fail`` (or
    nothing) as the address means the name does not resolve, ``*`` stands for every other
    name (the same hook ``prefetch doctor`` reads). Malformed pairs are ignored."""
    text = (os.environ if env is None else env).get("PREFETCH_RESOLVE", "")
    table: dict[str, str | None] = {}
    for item in text.replace(",", " ").split():
        host, sep, address = item.partition("=")
        if sep and host:
            address = address.strip().strip("[]")
            table[host.strip().lower().strip("[]")] = None if address.lower() in ("", "fail") else address
    return table


def _lookup(table: dict[str, str | None], host: str) -> tuple[bool, str | None]:
    """(overridden, address) for ``host``; ``*`` applies to names, never to IP literals."""
    import ipaddress

    if host in table:
        return True, table[host]
    if "*" in table:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return True, table["*"]
    return False, None


def adapter_for(resolve: dict[str, str | None]):
    """A requests adapter whose connections honour ``resolve`` and the head deadline."""
    from requests.adapters import HTTPAdapter

    pools = pool_classes(resolve)

    class _Adapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

        def proxy_manager_for(self, proxy, **kwargs):
            manager = super().proxy_manager_for(proxy, **kwargs)
            if hasattr(manager, "pool_classes_by_scheme") and not proxy.lower().startswith("socks"):
                manager.pool_classes_by_scheme = pools
            return manager

    return _Adapter()


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
_heads: dict = {}  # thread id -> the socket its request waits on: connecting, or for an answer's head


def abort_head(thread_id: int) -> None:
    """Shut down the socket thread ``thread_id`` is connecting or waits on for a response head,
    if it does (a stop); a blocked ``connect()`` returns at once with an error."""
    import socket

    sock = _heads.get(thread_id)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def idna_free(name: str) -> str | bytes:
    """``name`` as ``socket.getaddrinfo`` would pass it on, without loading the ``idna`` codec.

    getaddrinfo encodes a str host with the ``idna`` codec, whose first use imports
    ``encodings.idna``, ``stringprep`` and ``unicodedata`` (about 4 ms of every plain-HTTP
    process). For an ASCII name whose labels that codec accepts it returns the name's ASCII
    bytes unchanged, so those bytes are passed instead; any other name goes as it came (the
    codec's own encoding, or its own error).
    """
    if name.isascii():
        labels = name.split(".")
        if all(0 < len(label) < 64 for label in labels[:-1]) and len(labels[-1]) < 64:
            return name.encode("ascii")
    return name


def _connection_classes():
    if _CLASSES:
        return _CLASSES
    import socket
    import sys
    import threading

    from prefetch.net.deadlines import call_at

    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
    from urllib3.util.connection import allowed_gai_family
    from urllib3.util.timeout import _DEFAULT_TIMEOUT

    class _Mixin:
        resolve_table: dict = {}
        response_class = _quick_response_class()

        def _new_conn(self):
            host = (self._dns_host or "").lower().strip("[]")
            overridden, address = _lookup(self.resolve_table, host)
            if overridden and address is None:
                lookup = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
                raise NameResolutionError(self.host, self, lookup) from lookup
            # urllib3's own _new_conn, with the socket known to abort_head while it connects. The
            # override is only where to connect: ``_dns_host`` stays the name (urllib3's ``host``
            # reads it, and the Host header and TLS name of every request come from it).
            try:
                sock = self._connect_watched(address if overridden else self._dns_host)
            except socket.gaierror as exc:
                raise NameResolutionError(self.host, self, exc) from exc
            except socket.timeout as exc:
                raise ConnectTimeoutError(
                    self, f"Connection to {self.host} timed out. (connect timeout={self.timeout})") from exc
            except OSError as exc:
                raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc
            sys.audit("http.client.connect", self, self.host, self.port)
            return sock

        def _connect_watched(self, where: str):
            """Each address of ``where`` in turn, as urllib3's create_connection tries them."""
            me = threading.get_ident()
            error: OSError | None = None
            found = socket.getaddrinfo(idna_free(where.strip("[]")), self.port, allowed_gai_family(),
                                       socket.SOCK_STREAM)
            for family, kind, proto, _name, address in found:
                sock = socket.socket(family, kind, proto)
                try:
                    for option in self.socket_options or ():
                        sock.setsockopt(*option)
                    if self.timeout is not _DEFAULT_TIMEOUT:
                        sock.settimeout(self.timeout)
                    if self.source_address:
                        sock.bind(self.source_address)
                    _heads[me] = sock
                    sock.connect(address)
                    return sock
                except OSError as exc:
                    error = exc
                    sock.close()
                finally:
                    _heads.pop(me, None)
            raise error or OSError("getaddrinfo returns an empty list")

        def getresponse(self):
            return self._within_deadline(super().getresponse)

        def read_head(self, method: str):
            """http.client's answer to a request already sent on this connection's socket
            (``net/direct.py``'s warm path): its response class and ``begin``, under the same
            head deadline as :meth:`getresponse`; as http.client does, a connection the answer
            says will close is closed (the answer keeps reading from its socket)."""
            sock = self.sock
            if sock.gettimeout() != self.timeout:  # (settimeout is an ioctl even when nothing changes)
                sock.settimeout(self.timeout)

            def begin():
                response = self.response_class(sock, method=method)
                try:
                    response.begin()
                except BaseException:
                    response.close()
                    raise
                return response

            response = self._within_deadline(begin)
            if response.will_close:
                self.close()
            return response

        def _within_deadline(self, read):
            """``read()`` (a response head), the socket shut down when it takes longer than the read timeout."""
            deadline = self.timeout if isinstance(self.timeout, (int, float)) else None
            sock = self.sock
            if not deadline or sock is None:
                return read()
            expired = []  # (a list, not an Event: an Event is a Condition and a lock per request)

            def expire() -> None:
                expired.append(True)
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the read below
                except OSError:
                    pass

            timer = call_at(deadline, expire)  # one shared watchdog thread, not a thread per request
            me = threading.get_ident()
            _heads[me] = sock  # (abort_head: a stop on a thread with no main loop watching it)
            try:
                response = read()
            except Exception:
                if expired:
                    raise HeadTimeout(f"timed out: no complete response head within {deadline:g}s") from None
                raise
            finally:
                _heads.pop(me, None)
                timer.cancel()
            if expired:
                raise HeadTimeout(f"timed out: no complete response head within {deadline:g}s")
            return response

    class _HTTP(_Mixin, HTTPConnection):
        pass

    class _HTTPS(_Mixin, HTTPSConnection):
        pass

    _CLASSES.extend((_HTTP, _HTTPS))
    return _CLASSES


def _quick_response_class():
    """http.client's ``HTTPResponse`` whose ``begin`` (http.client's own code, whatever the
    Python version) parses the head with :func:`_quick_headers` instead of the ``email``
    parser; http.client's class itself when its ``begin`` cannot be reused so."""
    import http.client
    import types

    stock = http.client.HTTPResponse
    code = stock.begin.__code__
    if code.co_freevars or not hasattr(http.client, "_read_headers"):
        return stock
    names = dict(vars(http.client), parse_headers=_quick_headers)
    return type("QuickHeadResponse", (stock,), {"begin": types.FunctionType(code, names, "begin")})


_HEADER_LINE = None  # re: a plain header line, ``Name: value`` (the email parser's name characters)


def _quick_headers(fp, _class=None):
    """``http.client.parse_headers`` for a head of plain lines: the same ``HTTPMessage``
    (names and values as the email parser's compat32 policy reads them), built directly."""
    import http.client
    import re

    global _HEADER_LINE
    lines = http.client._read_headers(fp)  # (its limits on line length and count)
    cls = _class or http.client.HTTPMessage
    if _HEADER_LINE is None:
        _HEADER_LINE = re.compile(rb"([!-9;-~]+):([^\r\n]*)\r?\n?\Z")
    msg = cls()
    for line in lines[:-1]:
        plain = _HEADER_LINE.match(line)
        if plain is None or b"multipart" in line:
            import email.parser

            return email.parser.Parser(_class=cls).parsestr(b"".join(lines).decode("iso-8859-1"))
        msg.set_raw(plain.group(1).decode("iso-8859-1"), plain.group(2).decode("iso-8859-1").lstrip(" \t"))
    msg.set_payload("")
    return msg
