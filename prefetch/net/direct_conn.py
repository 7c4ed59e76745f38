"""One direct connection: a socket of our own (TLS by ``net/tls_context.py`` for https).

What urllib3's connection under requests does when it connects, without urllib3: the name
looked up in ``PREFETCH_RESOLVE`` first and each address tried in turn, a stop able to cut the
connect short (``net/open_socket.py``), no Nagle delay, the connect timeout on the connect and
the TLS handshake; the certificate checked against the name asked for (never an override's
address), SNI sent for a name. A TCP connect that fails other than by its name lookup raises
:class:`ConnectFailed` from the socket's exception (as urllib3's ``NewConnectionError`` and
``ConnectTimeoutError``: ``net/failures.py`` calls the host unreachable); the lookup's
``socket.gaierror`` and TLS's ``ssl`` exceptions are raised as they are.
"""

from __future__ import annotations

import socket
import sys
import threading

from prefetch.net.open_socket import address_for, connect_watched, watched


class ConnectFailed(OSError):
    """The TCP connect failed or timed out (its cause: the socket's exception)."""


class Connection:
    """A socket to ``key`` = (scheme, host, port), None once closed; ``epoch``: its pool's
    generation when it was opened (a pool closed since does not take it back)."""

    __slots__ = ("key", "sock", "epoch", "reader", "queued")

    def __init__(self, key: tuple[str, str, int], epoch: int = 0) -> None:
        self.key = key
        self.sock = None
        self.epoch = epoch
        self.reader = None  # http.client's reader of the last answer, kept for the answer sent ahead
        self.queued = None  # (request head, range start, range end) sent ahead (net/pipeline.py)

    def connect(self, resolve: dict, timeout: float, context=None) -> None:
        """Connect (and shake hands with ``context``, an ``ssl.SSLContext``, for https) within
        ``timeout`` seconds for each; ``timeout`` stays on the socket."""
        _scheme, host, port = self.key
        try:
            sock = connect_watched(address_for(resolve, host), port, timeout, name=host)
        except socket.gaierror:
            raise
        except socket.timeout as exc:
            raise ConnectFailed(f"Connection to {host} timed out. (connect timeout={timeout})") from exc
        except OSError as exc:
            raise ConnectFailed(f"Failed to establish a new connection: {exc}") from exc
        sys.audit("http.client.connect", self, host, port)
        if context is not None:
            from prefetch.net.tls_context import server_name

            me = threading.get_ident()
            watched[me] = sock  # (a stop cuts a handshake short too)
            try:
                sock = context.wrap_socket(sock, server_hostname=server_name(host))
            except BaseException:
                sock.close()
                raise
            finally:
                watched.pop(me, None)
        self.sock = sock

    def dropped(self) -> bool:
        """Closed, or readable while idle: the server closed it (or sent what nobody asked for).

        On TLS, what is readable may be only the session tickets a TLS 1.3 server sends after
        the handshake (a connection opened ahead and not used yet has them unread): a read
        that finds no application data says the connection is alive (urllib3 drops it)."""
        sock = self.sock
        if sock is None:
            return True
        import select

        poller = select.poll()
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return False
        if not hasattr(sock, "pending"):  # (a plain socket: EOF, or bytes nobody asked for)
            return True
        import ssl

        timeout = sock.gettimeout()
        sock.setblocking(False)
        try:
            sock.recv(1)  # (b"": closed; a byte: something unasked for; either way not reusable)
        except ssl.SSLWantReadError:
            return False  # TLS records without application data: tickets
        except OSError:
            pass
        finally:
            sock.settimeout(timeout)
        return True

    def close(self) -> None:
        sock, self.sock = self.sock, None
        reader, self.reader = self.reader, None
        self.queued = None
        if reader is not None:
            reader.close()
        if sock is not None:
            sock.close()
