"""One HTTP answer as prefetch reads it (:class:`Response`, made by ``net/http.py``'s ``Client``).

Its body is read with :meth:`Response.readinto` into the caller's reused buffer, one receive
at a time, straight from the ``http.client`` response (under urllib3's for an answer through
requests; ``net/answer.py``'s for a direct one: no layer copies or decodes it), or moved from the socket into a pipe (:meth:`Response.splice_into`,
``net/splice.py``).
"""

from __future__ import annotations

from prefetch.net.answer import Head, unfold_headers


class Response:
    """One response; its body is read with :meth:`readinto` / :meth:`read`.

    ``status``, ``headers`` (case-insensitive) and ``url`` (the URL that answered).
    The body is read from the ``http.client`` response under urllib3's (requests) or
    ``net/answer.py``'s (direct), so no layer copies or decodes it.
    """

    def __init__(self, resp, url: str, on_done) -> None:
        self._resp = resp  # urllib3's HTTPResponse (requests' ``Response.raw``), or net/answer.py's Answer
        self._raw = resp._fp  # the http.client.HTTPResponse under it
        self._on_done = on_done
        self._closed = False
        self._pushback = b""  # bytes :meth:`peek` read, served again first
        self._drained = False  # http.client's read buffer is known to be empty (net/splice.py)
        self._sock = None  # the plain socket to splice from (False: none)
        self.url = url
        self.status: int = resp.status
        self.headers = resp.headers  # case-insensitive
        if not isinstance(resp.headers, Head):  # (through requests: a folded value on one line, as a direct answer's)
            self.headers = unfold_headers(resp.headers)

    def round_trip(self) -> float | None:
        """The kernel's round-trip time on the connection that answered (:func:`tcp_round_trip`),
        which a busy machine's scheduling does not stretch as it does an answer's time; None through
        a proxy (the connection's round trip is the proxy's, not the host's) or where not known."""
        from prefetch.net.proxies import proxy_for

        if proxy_for(self.url) is not None:
            return None
        return tcp_round_trip(_response_socket(self._raw))

    def peek(self, n: int) -> bytes:
        """Up to the first ``n`` bytes of the body (fewer when it is shorter), without consuming them."""
        if len(self._pushback) < n:
            buffer = bytearray(n)
            view = memoryview(buffer)
            have = 0
            while have < n - len(self._pushback):
                try:
                    got = self._readinto(view[have:n - len(self._pushback)])
                except Exception:  # noqa: BLE001 - the next read meets the same trouble and reports it
                    break
                if not got:
                    break
                have += got
            self._pushback += bytes(buffer[:have])
        return self._pushback[:n]

    def readinto(self, buffer) -> int:
        """Read what has arrived (at most ``len(buffer)`` bytes) into ``buffer``; 0 at the end.

        Like ``read1``: one receive, not a loop until the buffer is full, so a
        slow connection still reports progress (and stalls) as bytes trickle in.
        """
        if self._pushback:
            n = min(len(buffer), len(self._pushback))
            buffer[:n] = self._pushback[:n]
            self._pushback = self._pushback[n:]
            return n
        return self._readinto(buffer)

    def _readinto(self, buffer) -> int:
        raw = self._raw
        if raw.fp is None:
            return 0
        if raw.chunked:
            return raw.readinto(buffer)  # http.client decodes the chunks
        if raw.length is None:  # the body ends when the server closes the connection
            n = raw.fp.readinto1(buffer)
            if not n:
                raw.close()
            return n
        if not raw.length:
            raw.close()
            return 0
        if len(buffer) > raw.length:
            buffer = memoryview(buffer)[: raw.length]
        n = raw.fp.readinto1(buffer)
        # After this read, is the BufferedReader's own buffer empty? (net/splice.py)
        self._drained = n < len(buffer) or len(buffer) > 2 * _buffer_size(raw.fp)
        return _count_body(raw, n)

    def splice_into(self, pipe, amount: int) -> int | None:
        """Move up to ``amount`` body bytes from the socket into ``pipe`` (``net/splice.py``);
        0 at the end; None when this response cannot (TLS, chunked, unknown length, bytes
        still buffered in user space): read it with :meth:`readinto`."""
        raw = self._raw
        if not self._drained or self._pushback or raw.fp is None or raw.chunked or not raw.length:
            return None
        from prefetch.net.splice import plain_socket, splice_in

        if self._sock is None:
            self._sock = plain_socket(raw) or False
        if not self._sock:
            return None
        n = splice_in(self._sock, pipe, min(amount, raw.length))
        return _count_body(raw, n)

    def read(self, amount: int | None = None) -> bytes:
        head, self._pushback = self._pushback, b""
        if amount is not None:
            if len(head) >= amount:
                head, self._pushback = head[:amount], head[amount:]
                return head
            amount -= len(head)
        return head + self._raw.read(amount)

    def text(self) -> str:
        """The whole body decoded (the Content-Type charset, else UTF-8)."""
        charset = self._raw.msg.get_content_charset() or "utf-8"
        try:
            return self.read().decode(charset, errors="replace")
        except LookupError:
            return self.read().decode("utf-8", errors="replace")

    @property
    def complete(self) -> bool:
        """The whole body has been read (the connection can serve another request)."""
        return self._raw.isclosed()

    def close(self) -> None:
        """Done with the body. An unread rest closes the connection (it cannot be reused)."""
        if self._closed:
            return
        self._closed = True
        raw = self._resp
        complete = self._raw.isclosed()
        try:
            if not complete:
                raw.close()  # closes the socket: the pool opens a fresh one next time
            raw.release_conn()
        finally:
            self._on_done(complete)

    def abort(self) -> None:
        """Shut the socket down so a thread blocked reading this response wakes up."""
        import socket

        conn = getattr(self._resp, "_connection", None)
        for sock in (getattr(conn, "sock", None), _response_socket(self._raw)):
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _count_body(raw, n: int) -> int:
    """Book ``n`` body bytes read (or spliced) from ``raw`` (http.client's response); 0 before
    the announced end is an IncompleteRead, the last byte closes ``raw`` so the connection can
    serve the next request."""
    if not n:
        import http.client

        missing = raw.length
        raw.close()
        raise http.client.IncompleteRead(b"", missing)
    raw.length -= n
    if not raw.length:
        raw.close()
    return n


def _buffer_size(fp) -> float:
    """The size of a C ``io.BufferedReader``'s buffer (its ``__sizeof__`` counts it), else infinity.

    Its ``readinto1`` copies what is buffered (at most this much), then reads the socket
    once straight into the caller's buffer when more than this is still wanted, leaving
    its own buffer empty: so a read of more than twice this, or one that returns less
    than asked, empties it.
    """
    import io

    if type(fp) is not io.BufferedReader:
        return float("inf")
    return fp.__sizeof__() - type(fp).__basicsize__


def tcp_round_trip(sock) -> float | None:
    """The kernel's round-trip time of ``sock`` in seconds (Linux ``TCP_INFO``: ``tcpi_min_rtt``,
    else ``tcpi_rtt``), or None (no socket, not TCP, no ``TCP_INFO`` here)."""
    import socket
    import struct

    option = getattr(socket, "TCP_INFO", None)
    if sock is None or option is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, option, 256)
    except (OSError, ValueError):
        return None
    # struct tcp_info: tcpi_rtt (us) at byte 68, tcpi_min_rtt (us; Linux 4.6+) at byte 148.
    offset = 148 if len(info) >= 152 else 68 if len(info) >= 72 else None
    if offset is None:
        return None
    (micro,) = struct.unpack_from("=I", info, offset)
    return micro / 1e6 if micro else None


def _response_socket(raw):
    try:
        return raw.fp.raw._sock  # BufferedReader -> SocketIO -> socket
    except AttributeError:
        return None
