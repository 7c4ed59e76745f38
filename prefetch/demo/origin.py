"""The small HTTP origin ``prefetch demo`` downloads from.

``OriginServer`` serves in-memory files (``put``) over HTTP/1.1 on 127.0.0.1, port 0,
one thread per connection: GET and HEAD, one ``Range`` (``http_rules.parse_range``: 206, or 416
with ``bytes */SIZE`` as nginx does), ``If-Range`` (``http_rules.if_range_matches``), ``ETag`` and
``Last-Modified``, 404 for unknown names; paths are percent-decoded, a query string is
ignored. ``rate`` throttles each response to that many bytes/s, like nginx's
``limit_rate``, and the demo's one fault shows a resume: ``add_fault(CloseAfter(n,
path=name))`` makes the next GET of ``name`` stop after ``n`` body bytes.

The test suite's origin (``tests/origin.py``) adds its fault switches through the hooks.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from prefetch.demo.http_rules import (default_etag, http_date, if_range_matches, normalize_name, parse_range,
                                      url_under)

__all__ = ["CloseAfter", "Exchange", "Fault", "OriginServer", "http_date"]

CHUNK = 64 * 1024


@dataclass(kw_only=True)
class Fault:
    """A one-shot misbehaviour for the first request that matches ``path`` (a name as
    given to ``put``), ``method`` and ``only_ranged`` (with Range or without); None
    matches any. Faults that shape a body never match HEAD: a probe leaves them to GET."""

    path: str | None = None
    method: str | None = None
    only_ranged: bool | None = None

    shapes_body: ClassVar[bool] = False

    def matches(self, *, method: str, name: str, ranged: bool) -> bool:
        if self.shapes_body and method == "HEAD":
            return False
        if self.method is not None and self.method.upper() != method:
            return False
        if self.path is not None and normalize_name(self.path) != name:
            return False
        return self.only_ranged is None or self.only_ranged == ranged


@dataclass
class CloseAfter(Fault):
    """Send the normal headers, then ``n`` body bytes, then drop the connection
    (FIN; ``reset=True`` sends a TCP RST instead)."""

    n: int
    reset: bool = False
    shapes_body: ClassVar[bool] = True


@dataclass(frozen=True)
class StoredFile:
    data: bytes
    etag: str
    last_modified: int  # whole seconds, as HTTP-dates carry


@dataclass
class Exchange:
    """One request, in ``requests`` from when its headers arrive. ``status`` is set before
    the status line is sent, ``body_bytes_sent`` grows before each write."""

    method: str
    name: str  # the decoded file name, e.g. "a b.bin"
    status: int | None = None
    body_bytes_sent: int = 0


@dataclass
class Reply:
    """A file response in the making: bytes ``start``..``end`` (inclusive) of a file of
    ``size`` bytes. Content-Length is ``len(body)`` unless ``headers`` has one."""

    status: int
    start: int
    end: int
    size: int
    headers: dict[str, str]
    body: bytes


class _Stop(Exception):
    """The client went away or the server is stopping: end this connection quietly."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup: skip it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", self.server_address[1]

    def finish_request(self, request, client_address) -> None:
        # Runs in the connection's own thread, so a slow handshake never blocks accepts.
        with suppress(OSError):  # headers and body go out in separate writes: no Nagle stalls
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        origin = self.origin
        sock = origin._wrap(request)
        if sock is None:
            return
        origin._track(sock, add=True)
        try:
            self.RequestHandlerClass(sock, client_address, self)
        except (OSError, _Stop):
            pass
        finally:
            origin._track(sock, add=False)
            if sock is not request:
                with suppress(OSError):
                    sock.close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "prefetch-demo-origin/1"
    timeout = 60  # idle keep-alive connections end by themselves

    def log_message(self, format, *args) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:
        self.server.origin._handle(self)

    do_HEAD = do_GET


class OriginServer:
    """Threaded HTTP/1.1 origin serving in-memory files; see the module docstring."""

    scheme = "http"

    def __init__(self) -> None:
        self.rate: int | None = None  # bytes/s per response
        self.requests: list[Exchange] = []
        self.url = ""
        self.port = 0
        self._files: dict[str, StoredFile] = {}
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._closed = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._connections: set = set()
        self._peak_connections = 0
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self, port: int = 0) -> OriginServer:
        """Listen on 127.0.0.1:``port`` (0: a free one; a test restarts a server where it was)."""
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = server = _HTTPServer(("127.0.0.1", port), _Handler)
        server.origin = self
        self.port = server.server_address[1]
        self.url = f"{self.scheme}://127.0.0.1:{self.port}/"
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"origin-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for sock in connections:  # wake keep-alive readers and stalled writers
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._closed:  # handler threads end promptly once their sockets are shut
            self._closed.wait_for(lambda: not self._connections, timeout=5)

    def __enter__(self) -> OriginServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def url_for(self, name: str) -> str:
        return url_under(self.url, name)

    def put(self, name: str, data: bytes, *, etag: str | None = None,
            last_modified: float | None = None) -> None:
        """Add or replace a file. Default ETag: quoted sha1 of the content. Default
        Last-Modified: now, and always later than the replaced version's (putting the
        same bytes again keeps the old one)."""
        name, data = normalize_name(name), bytes(data)
        with self._lock:
            old = self._files.get(name)
            if last_modified is None and old is not None and old.data == data:
                stamp = old.last_modified  # same bytes again: not a change
            elif last_modified is None:
                stamp = int(time.time())
                if old is not None and stamp <= old.last_modified:
                    stamp = old.last_modified + 1
            else:
                stamp = int(last_modified)
            self._files[name] = StoredFile(data, etag or default_etag(data), stamp)

    def add_fault(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    @property
    def bytes_sent(self) -> int:
        """Body bytes sent in all responses so far."""
        with self._lock:
            return sum(r.body_bytes_sent for r in self.requests)

    # -- hooks: the test origin overrides these; here they do what the demo needs --

    def _wrap(self, sock):
        """The socket to speak HTTP on (None: drop the connection)."""
        return sock

    def _exchange(self, h: _Handler, name: str) -> Exchange:
        return Exchange(method=h.command, name=name)

    def _respond(self, h: _Handler, ex: Exchange) -> None:
        fault = self._take_fault(method=ex.method, name=ex.name, ranged="Range" in h.headers)
        with self._lock:
            current = self._files.get(ex.name)
        if current is None:
            self._send_simple(h, ex, 404)
        else:
            self._send_file(h, ex, current, fault)

    def _file_headers(self, current: StoredFile) -> dict[str, str]:
        return {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes",
                "ETag": current.etag, "Last-Modified": http_date(current.last_modified)}

    def _honours_range(self, fault: Fault | None) -> bool:
        return True

    def _shape(self, reply: Reply, current: StoredFile, fault: Fault | None) -> None:
        """Change a file response in place before it is sent."""

    def _write_reply(self, h: _Handler, ex: Exchange, body: bytes, fault: Fault | None) -> None:
        if isinstance(fault, CloseAfter):
            self._write_body(h, ex, body[:fault.n])
            self._drop(h, reset=fault.reset)
        else:
            self._write_body(h, ex, body)

    def _chunk_size(self) -> int:
        """Bytes a write: small enough for ``rate`` to pace smoothly."""
        return max(1, min(CHUNK, (self.rate or 10 * CHUNK) // 10))

    def _after_write(self, size: int) -> None:
        """Called after each write of ``size`` body bytes."""

    def _throttle(self, seconds: float) -> None:
        self._sleep(seconds)

    # -- serving ------------------------------------------------------------------

    def _track(self, sock, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(sock)
                self._peak_connections = max(self._peak_connections, len(self._connections))
            else:
                self._connections.discard(sock)
                self._closed.notify_all()

    def _handle(self, h: _Handler) -> None:
        ex = self._exchange(h, normalize_name(unquote(urlsplit(h.path).path, errors="replace")))
        with self._lock:
            self.requests.append(ex)
        self._respond(h, ex)

    def _take_fault(self, *, method: str, name: str, ranged: bool) -> Fault | None:
        with self._lock:
            for index, fault in enumerate(self._faults):
                if fault.matches(method=method, name=name, ranged=ranged):
                    return self._faults.pop(index)
        return None

    def _send_file(self, h: _Handler, ex: Exchange, current: StoredFile, fault: Fault | None) -> None:
        size = len(current.data)
        headers = self._file_headers(current)
        range_header, if_range = h.headers.get("Range"), h.headers.get("If-Range")
        span = None
        if range_header is not None and self._honours_range(fault):
            if if_range is None or if_range_matches(if_range, headers):
                span = parse_range(range_header, size)
        if span == "unsatisfiable":
            headers["Content-Range"] = f"bytes */{size}"
            self._send_simple(h, ex, 416, extra=headers)
            return
        status, (start, end) = (200, (0, size - 1)) if span is None else (206, span)
        reply = Reply(status, start, end, size, headers, current.data[start:end + 1])
        self._shape(reply, current, fault)
        if reply.status == 206:
            headers["Content-Range"] = f"bytes {reply.start}-{reply.end}/{size}"
        headers.setdefault("Content-Length", str(len(reply.body)))
        self._send(h, ex, reply.status, headers, reply.body, fault)

    def _send_simple(self, h: _Handler, ex: Exchange, code: int, *,
                     extra: dict[str, str] | None = None) -> None:
        """``code`` with a one-line text body; ``extra`` headers as given."""
        body = f"{code} {h.responses.get(code, ('',))[0]}\n".encode()
        headers = {"Content-Type": "text/plain; charset=utf-8", **(extra or {})}
        headers["Content-Length"] = str(len(body))
        self._send(h, ex, code, headers, body)

    def _send(self, h: _Handler, ex: Exchange, status: int, headers: dict[str, str],
              body: bytes, fault: Fault | None = None) -> None:
        ex.status = status
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.end_headers()
        if h.command != "HEAD":
            self._write_reply(h, ex, body, fault)

    def _write_body(self, h: _Handler, ex: Exchange, body: bytes) -> None:
        rate, chunk = self.rate, self._chunk_size()
        started, sent, view = time.monotonic(), 0, memoryview(body)
        while sent < len(body):
            if self._stopping.is_set():
                raise _Stop()
            piece = view[sent:sent + chunk]
            # Count before writing: a client that has read the last byte must already
            # see it in the record (a failed write leaves the count as attempted).
            ex.body_bytes_sent += len(piece)
            try:
                h.wfile.write(piece)
            except OSError as exc:
                h.close_connection = True
                raise _Stop() from exc
            sent += len(piece)
            self._after_write(len(piece))
            ahead = sent / rate - (time.monotonic() - started) if rate else 0.0
            if ahead > 0:
                self._throttle(ahead)

    def _sleep(self, seconds: float) -> None:
        if self._stopping.wait(seconds):
            raise _Stop()

    @staticmethod
    def _drop(h: _Handler, *, reset: bool = False) -> None:
        h.close_connection = True
        sock = h.connection
        with suppress(OSError):
            if reset:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            else:
                sock.shutdown(socket.SHUT_RDWR)
