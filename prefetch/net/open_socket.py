"""Where a connection is made: ``PREFETCH_RESOLVE``, the TCP connect, and a stop that cuts it short.

Shared by the connections under requests (``net/connection.py``, urllib3's) and the direct
ones (``net/direct_conn.py``, http.client's response on a socket of our own):

* :func:`resolve_overrides` reads ``PREFETCH_RESOLVE`` (``host=address`` pairs, like curl's
  ``--resolve``; ``host=fail`` makes the name fail to resolve, which is how the tests
  simulate a DNS failure (``EAI_NONAME``; ``host=again``: ``EAI_AGAIN``, a resolver that
  cannot be asked); ``*`` is every other name: the same hook as ``prefetch doctor``'s);
  :func:`address_for` applies it: only where to connect, never the name sent or checked;
* :func:`connect_watched` connects to a name's one address as urllib3's ``create_connection``
  does, or races its several addresses (Happy Eyeballs, RFC 8305), with the sockets known to
  :func:`abort_head` while they connect;
* :func:`connected_once`: whether any connection of this process was ever made (a lookup
  that fails before one is a machine without internet: ``net/unresolved.py``), and
  :func:`reached`: whether one to a given name and port was (a connect refused or unreachable
  before one is a route that is off, not a server restarting: ``net/unreachable.py``);
* :func:`abort_head` shuts down the socket a thread is connecting or waits on for an answer's
  head (``net/read_head.py`` registers that one), so a stop on a thread that runs its request
  itself ends a connect to a host that has stopped answering handshakes too, not after the
  connect timeout.

Failures are the socket's own exceptions (the caller wraps them as its library does).
"""

from __future__ import annotations

import os
import socket
import threading

watched: dict = {}  # thread id -> the socket its request waits on: connecting, or for an answer's head
_connected: list = []  # [True] once a connect of this process succeeded (connected_once)
_reached: set = set()  # (name, port) of every connect of this process that succeeded (reached)
AGAIN = "again"  # PREFETCH_RESOLVE's address for a name whose lookup fails with EAI_AGAIN


def connected_once() -> bool:
    """Whether a TCP connect of this process ever succeeded (to any host, a proxy included)."""
    return bool(_connected)


def reached(name: str, port: int) -> bool:
    """Whether a TCP connect of this process to ``name`` (as the URL spells it) and ``port`` ever succeeded."""
    return (name.lower().strip("[]"), port) in _reached


def _mark(name: str, port: int) -> None:
    _connected[:] = [True]
    if len(_reached) < 4096:  # (a list of URLs over thousands of hosts: the first ones are remembered)
        _reached.add((name.lower().strip("[]"), port))


def resolve_overrides(env=None) -> dict[str, str | None]:
    """``PREFETCH_RESOLVE``: ``host=address`` pairs (comma- or space-separated); ``fail`` (or
    nothing) as the address means the name does not resolve (``again``: its lookup fails with
    ``EAI_AGAIN``), ``*`` stands for every other
    name (the same hook ``prefetch doctor`` reads). Malformed pairs are ignored."""
    text = (os.environ if env is None else env).get("PREFETCH_RESOLVE", "")
    table: dict[str, str | None] = {}
    for item in text.replace(",", " ").split():
        host, sep, address = item.partition("=")
        if sep and host:
            address = "|".join(a.strip().strip("[]") for a in address.split("|") if a.strip())
            table[host.strip().lower().strip("[]")] = None if address.lower() in ("", "fail") else address
    return table


def _lookup(table: dict[str, str | None], host: str) -> tuple[bool, str | None]:
    """(overridden, address) for ``host``; ``*`` applies to names, never to IP literals."""
    if host in table:
        return True, table[host]
    if "*" in table:
        import ipaddress

        try:
            ipaddress.ip_address(host)
        except ValueError:
            return True, table["*"]
    return False, None


def address_for(table: dict[str, str | None], host: str) -> str:
    """Where to connect for ``host`` (the name itself unless ``table`` overrides it).

    Raises:
        socket.gaierror: ``table`` says the name does not resolve (as a failed lookup would).
    """
    if not table:
        return host
    overridden, address = _lookup(table, host.lower().strip("[]"))
    if not overridden:
        return host
    if address is None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    if address == AGAIN:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    return address


def abort_head(thread_id: int) -> None:
    """Shut down the socket thread ``thread_id`` is connecting or waits on for a response head,
    if it does (a stop); a blocked ``connect()`` returns at once with an error."""
    sock = watched.get(thread_id)
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


_FAMILY: list = []


def gai_family() -> int:
    """urllib3's ``allowed_gai_family``: any family where this machine can bind ``::1``, else IPv4 only."""
    if not _FAMILY:
        family = socket.AF_INET
        if socket.has_ipv6:
            try:
                with socket.socket(socket.AF_INET6) as probe:
                    probe.bind(("::1", 0))
                family = socket.AF_UNSPEC
            except Exception:  # noqa: BLE001 - as urllib3's _has_ipv6: no IPv6 here
                pass
        _FAMILY.append(family)
    return _FAMILY[0]


# urllib3's default socket options (requests keeps them): no Nagle delay on the request head.
NODELAY = ((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),)


def connect_watched(where: str, port: int, timeout, options=NODELAY, family: int | None = None,
                    source_address=None, *, name: str | None = None) -> socket.socket:
    """A socket connected to ``where`` (a name, an address, or addresses joined by ``|`` from
    ``PREFETCH_RESOLVE``), ``timeout`` on it (None: leave it blocking); while it connects,
    :func:`abort_head` on this thread shuts it down. ``name``: the host as the URL spells it
    (``where`` when None), remembered for :func:`reached` once connected.

    A name with one address is connected to as urllib3 does. With several, the connects are
    staggered (Happy Eyeballs, RFC 8305): the families alternate, the next address is tried
    when the one before has not connected within :data:`NEXT_ADDRESS_AFTER` (at once when it
    failed), each attempt has ``timeout``, the first to connect wins, and the address that
    answered goes first for that name from then on. A dead address (an IPv6 route that drops
    packets, a replica that is down) costs a quarter of a second, not the connect timeout.

    Raises:
        socket.gaierror, socket.timeout, OSError: the socket's own.
    """
    found = []
    failed: Exception | None = None
    for each in where.split("|"):
        try:
            found += socket.getaddrinfo(idna_free(each.strip("[]")), port, gai_family() if family is None else family,
                                        socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:  # (one name of several: the others still race)
            failed = exc
    if not found and failed is not None:
        raise failed
    if len(found) > 1:
        sock = _race(where, _in_turn(where, found), timeout, options, source_address)
        _mark(name or where, port)
        return sock
    me = threading.get_ident()
    error: OSError | None = None
    for family_, kind, proto, _name, address in found:
        sock = socket.socket(family_, kind, proto)
        try:
            for option in options or ():
                sock.setsockopt(*option)
            if timeout is not None:
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            watched[me] = sock
            sock.connect(address)
            _mark(name or where, port)
            return sock
        except OSError as exc:
            error = exc
            sock.close()
        finally:
            watched.pop(me, None)
    raise error or OSError("getaddrinfo returns an empty list")


NEXT_ADDRESS_AFTER = 0.25  # RFC 8305's Connection Attempt Delay
_answered: dict = {}  # where -> the IP that connected last (tried first next time, on any port)


def _in_turn(where: str, found: list) -> list:
    """``found`` with the families alternating from the first one's (RFC 8305), and the
    address that answered last for ``where`` first."""
    families: dict = {}
    for entry in found:
        families.setdefault(entry[0], []).append(entry)
    order = []
    queues = list(families.values())
    while any(queues):
        for queue in queues:
            if queue:
                order.append(queue.pop(0))
    good = _answered.get(where)
    return sorted(order, key=lambda entry: entry[4][0] != good)  # (stable; the IP: a name's other ports too)


class _Attempts:
    """The connects in flight for one thread: what :func:`abort_head` shuts down."""

    def __init__(self) -> None:
        self.socks: list = []
        self.stopped = False

    def shutdown(self, how) -> None:
        self.stopped = True
        for sock in list(self.socks):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def _race(where: str, found: list, timeout, options, source_address) -> socket.socket:
    import errno
    import selectors
    import time

    me = threading.get_ident()
    attempts = _Attempts()
    pending: dict = {}  # socket -> (address, started)
    error: OSError | None = None
    selector = selectors.DefaultSelector()
    watched[me] = attempts
    try:
        queue = list(found)
        next_at = 0.0
        while True:
            now = time.monotonic()
            if queue and (not pending or now >= next_at):
                family_, kind, proto, _name, address = queue.pop(0)
                sock = socket.socket(family_, kind, proto)
                try:
                    for option in options or ():
                        sock.setsockopt(*option)
                    if source_address:
                        sock.bind(source_address)
                    sock.setblocking(False)
                    code = sock.connect_ex(address)
                except OSError as exc:
                    code, error = None, exc
                if code in (errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK, 0):
                    pending[sock] = (address, now)
                    attempts.socks.append(sock)
                    selector.register(sock, selectors.EVENT_WRITE)
                    next_at = now + NEXT_ADDRESS_AFTER
                else:
                    if code is not None:
                        error = OSError(code, os.strerror(code))
                    sock.close()
                continue
            if not pending:
                raise error or OSError("getaddrinfo returns an empty list")
            if attempts.stopped:
                raise OSError(errno.ECONNABORTED, "connect stopped")
            waits = [started + timeout - now for _address, started in pending.values()] if timeout is not None else []
            if queue:
                waits.append(next_at - now)
            for key, _events in selector.select(max(0.0, min(waits)) if waits else None):
                sock = key.fileobj
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code == 0 and not attempts.stopped:
                    address = pending.pop(sock)[0]
                    sock.settimeout(timeout)
                    _answered[where] = address[0]
                    return sock
                selector.unregister(sock)
                pending.pop(sock)
                sock.close()
                error = OSError(code or errno.ECONNABORTED, os.strerror(code or errno.ECONNABORTED))
                next_at = 0.0  # the next address at once
            now = time.monotonic()
            for sock, (_address, started) in list(pending.items()):
                if timeout is not None and now - started >= timeout:
                    selector.unregister(sock)
                    pending.pop(sock)
                    sock.close()
                    error = socket.timeout("timed out")
    finally:
        watched.pop(me, None)
        for sock in pending:
            sock.close()
        selector.close()
