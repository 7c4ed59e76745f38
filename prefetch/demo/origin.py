"""In-process HTTP(S) origin servers: the demo's built-in origin and the test suite's.

``OriginServer`` is a threaded HTTP/1.1 server (keep-alive, one daemon thread per
connection) on 127.0.0.1, port 0. It serves in-memory files, honours ``Range`` the way
nginx does (RFC 9110), and misbehaves on demand:

* one-shot faults (``add_fault``), consumed in FIFO order by the next request that
  matches the fault's ``path`` / ``method`` / ``only_ranged`` filters;
* persistent switches (attributes): ``ignore_range``, ``rate`` (bytes/s per response,
  like nginx's ``limit_rate``), ``total_rate`` (bytes/s shared by every response: one
  link that more connections cannot widen), ``connection_limit`` (more open connections
  than this get ``connection_limit_status``, 503 with ``Retry-After: 1`` by default, as
  mirrors that cap connections per client do), ``send_etag``, ``send_last_modified``,
  ``accept_ranges``, ``basic_auth`` ((user, password): 401 unless the request has them);
  persistent redirects (``set_redirect``);
  ``loop_path`` always redirects to itself; ``portal`` (bytes: every request gets
  ``200 text/html`` with that page, as a captive portal or block page answers);
  ``set_pool(name, versions)`` (each request for ``name`` is served by the next of
  several backends holding different versions, as an out-of-sync pool does).

Range semantics (what a client may rely on):

* ``bytes=a-b``, ``bytes=a-`` and ``bytes=-n`` (suffix) give 206 with
  ``Content-Range: bytes a-b/SIZE``; ``b`` past the end is clipped, a suffix longer than
  the file is the whole file.
* Unsatisfiable (``a >= SIZE``, ``b < a``, ``-0``, any range of an empty file) gives 416
  with ``Content-Range: bytes */SIZE`` (as nginx does).
* Multi-range (``bytes=0-1,5-6``) and syntactically invalid or non-``bytes`` ranges are
  ignored: 200 with the full body (RFC 9110 allows ignoring Range).
* ``If-Range`` is honoured only with ``Range``: a strong ETag must equal the current ETag
  (weak tags never match); an HTTP-date must equal the current Last-Modified exactly.
  A validator the server does not send (``send_etag=False`` ...) never matches. No match
  means 200 with the full body.
* HEAD gets the same status and headers as GET (Range applies too), and no body.
* ``Content-Length`` is always sent (only ``LongContentLength`` lies about it).
* Unknown names give 404. Paths are percent-decoded, so names may contain spaces, ``/``
  and non-ASCII; a query string is ignored.

Fault matching: ``path`` (a file name as given to ``put``; None = any), ``method``
(None = any), ``only_ranged`` (True: only requests with a Range header, False: only
without, None: both). Faults that shape a body (CloseAfter, StallAfter,
LongContentLength, WrongBytes, Gzip, WrongContentRange, IgnoreRange) never match HEAD,
so a client's HEAD probe does not eat a fault meant for its GET.

A redirect loop: request ``server.loop_url`` (every path under ``loop_path`` answers 302
to itself), or add ``Redirect(server.url_for(name), path=name)`` several times.

TLS (``tls=True``) needs the ``cryptography`` package: a throwaway CA and a leaf
certificate for 127.0.0.1 and localhost are generated at ``start()``; ``ca_path`` is the
CA's PEM file, for ``verify=`` / ``REQUESTS_CA_BUNDLE``.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import gzip
import hashlib
import shutil
import socket
import ssl
import struct
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, unquote, urlsplit

__all__ = [
    "ChangeContent",
    "CloseAfter",
    "Delay",
    "Fault",
    "Gzip",
    "IgnoreRange",
    "PORTAL_PAGE",
    "WebPage",
    "LongContentLength",
    "OriginServer",
    "Redirect",
    "RequestRecord",
    "SilentServer",
    "StallAfter",
    "Status",
    "WrongBytes",
    "WrongContentRange",
    "http_date",
]

CHUNK = 64 * 1024
PORTAL_PAGE = (b"<!DOCTYPE html>\n<html><head><title>Sign in to the network</title></head>\n"
               b"<body><form action=\"/login\" method=\"post\">Accept the terms to continue"
               b"<input type=\"submit\"></form></body></html>\n")


def http_date(timestamp: float) -> str:
    """Format a POSIX timestamp as an IMF-fixdate (the form Last-Modified uses)."""
    return email.utils.formatdate(timestamp, usegmt=True)


def _parse_http_date(value: str) -> int | None:
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.timezone.utc)
    return int(parsed.timestamp())


def _normalize_name(name: str) -> str:
    return name.lstrip("/")


# --------------------------------------------------------------------------- records


class Headers(Mapping):
    """Request headers with case-insensitive lookups; keeps the original spelling."""

    def __init__(self, items: list[tuple[str, str]]):
        self._items = list(items)
        self._map: dict[str, str] = {}
        for key, value in items:
            self._map.setdefault(key.lower(), value)

    def __getitem__(self, key: str) -> str:
        return self._map[key.lower()]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._map

    def __iter__(self) -> Iterator[str]:
        seen = set()
        for key, _ in self._items:
            if key.lower() not in seen:
                seen.add(key.lower())
                yield key

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"Headers({dict(self)!r})"


@dataclass
class RequestRecord:
    """One request as the server saw it, appended when its headers arrive.
    ``status`` is set before the status line is sent; ``body_bytes_sent`` grows before
    each write, so once a client has read a byte it is already counted."""

    method: str
    path: str  # raw request target, e.g. "/a%20b.bin?x=1"
    name: str  # decoded file name, e.g. "a b.bin"
    headers: Headers
    client: tuple[str, int]  # (host, port): one value per TCP connection
    status: int | None = None
    body_bytes_sent: int = 0
    fault: str | None = None  # class name of the fault applied, if any
    started: float = field(default_factory=time.monotonic)

    @property
    def range(self) -> str | None:
        return self.headers.get("Range")


# --------------------------------------------------------------------------- faults


@dataclass(kw_only=True)
class Fault:
    """Base class: filters shared by every fault (all keyword-only)."""

    path: str | None = None
    method: str | None = None
    only_ranged: bool | None = None

    shapes_body: ClassVar[bool] = False

    def matches(self, *, method: str, name: str, ranged: bool) -> bool:
        if self.shapes_body and method == "HEAD":
            return False
        if self.method is not None and self.method.upper() != method:
            return False
        if self.path is not None and _normalize_name(self.path) != name:
            return False
        if self.only_ranged is not None and self.only_ranged != ranged:
            return False
        return True


@dataclass
class CloseAfter(Fault):
    """Send the normal headers, then ``n`` body bytes, then drop the connection
    (FIN; ``reset=True`` sends a TCP RST instead)."""

    n: int
    reset: bool = False
    shapes_body: ClassVar[bool] = True


@dataclass
class StallAfter(Fault):
    """Send headers and ``n`` body bytes, then send nothing for ``seconds`` (socket kept
    open), then close the connection."""

    n: int
    seconds: float
    shapes_body: ClassVar[bool] = True


@dataclass
class Delay(Fault):
    """Wait ``seconds`` before answering at all (slow time-to-first-byte), then answer
    normally."""

    seconds: float


@dataclass
class Status(Fault):
    """Answer with ``code`` and a short text body. ``retry_after`` (seconds or an
    HTTP-date string) becomes ``Retry-After``; ``headers`` are added as given. A 416
    without an explicit Content-Range gets ``bytes */SIZE`` for a known file."""

    code: int
    retry_after: int | str | None = None
    headers: dict[str, str] | None = None


@dataclass
class IgnoreRange(Fault):
    """Answer this one request with 200 and the full body, whatever Range says."""

    shapes_body: ClassVar[bool] = True


@dataclass
class WrongContentRange(Fault):
    """206 whose Content-Range starts ``shift`` bytes after the requested start (or
    before it, when after is impossible), with the bytes that range really holds."""

    shift: int = 1
    shapes_body: ClassVar[bool] = True


@dataclass
class LongContentLength(Fault):
    """Announce a Content-Length ``extra`` bytes longer than the body sent, then close."""

    extra: int
    shapes_body: ClassVar[bool] = True


@dataclass
class Gzip(Fault):
    """Answer with ``Content-Encoding: gzip`` and a gzip of the requested slice (206 with
    the requested Content-Range on a Range request; Content-Length is the gzip size)."""

    shapes_body: ClassVar[bool] = True


@dataclass
class WebPage(Fault):
    """Answer 200 with a web page (``body``) instead of the file, as a captive portal does.
    ``content_type`` is sent as given (None: no Content-Type at all)."""

    body: bytes = PORTAL_PAGE
    content_type: str | None = "text/html; charset=utf-8"


@dataclass
class Redirect(Fault):
    """Answer ``code`` with ``Location: location`` (relative or absolute, sent as is)."""

    location: str
    code: int = 302


@dataclass
class ChangeContent(Fault):
    """Replace the file (new ETag and Last-Modified) before answering this request."""

    data: bytes


@dataclass
class WrongBytes(Fault):
    """Correct status and headers, but one byte in the middle of the body is flipped."""

    shapes_body: ClassVar[bool] = True


# --------------------------------------------------------------------------- server


@dataclass(frozen=True)
class _File:
    data: bytes
    etag: str
    last_modified: int  # whole seconds, as HTTP-dates carry


class _Stop(Exception):
    """The client went away or the server is stopping: end this connection quietly."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    allow_reuse_address = True

    origin: OriginServer
    ssl_context: ssl.SSLContext | None = None

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup: skip it.
        import socketserver

        socketserver.TCPServer.server_bind(self)
        self.server_name = "127.0.0.1"
        self.server_port = self.server_address[1]

    def finish_request(self, request, client_address) -> None:
        # Runs in the connection's own thread, so a slow TLS handshake never blocks
        # the accept loop.
        origin = self.origin
        try:  # headers and body go out in separate writes: avoid Nagle/delayed-ACK stalls
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        if self.ssl_context is not None:
            request.settimeout(10)
            try:
                request = self.ssl_context.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError):
                return
        origin._track(request, add=True)
        try:
            self.RequestHandlerClass(request, client_address, self)
        except (OSError, _Stop):
            pass
        finally:
            origin._track(request, add=False)
            if self.ssl_context is not None:
                try:
                    request.close()
                except OSError:
                    pass

    def handle_error(self, request, client_address) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (OSError, _Stop)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "origin-test/1"
    timeout = 60  # idle keep-alive connections end by themselves

    server: _HTTPServer

    def log_message(self, format, *args) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:
        self.server.origin._handle(self)

    def do_HEAD(self) -> None:
        self.server.origin._handle(self)


class OriginServer:
    """Threaded HTTP/1.1 origin serving in-memory files; see the module docstring."""

    loop_path = "/__loop__"

    def __init__(self, *, tls: bool = False):
        self.tls = tls
        # persistent switches
        self.ignore_range = False
        self.rate: int | None = None
        self.total_rate: int | None = None
        self.connection_limit: int | None = None
        self.connection_limit_status = 503
        self.send_etag = True
        self.send_last_modified = True
        self.accept_ranges = True
        self.basic_auth: tuple[str, str] | None = None  # (user, password): 401 without them
        self.portal: bytes | None = None

        self.requests: list[RequestRecord] = []
        self.ca_path: Path | None = None
        self.url = ""
        self.port = 0

        self._files: dict[str, _File] = {}
        self._faults: list[Fault] = []
        self._redirects: dict[str, tuple[str, int]] = {}
        self._pools: dict[str, list[bytes]] = {}
        self._pool_next: dict[str, int] = {}
        self._lock = threading.Lock()
        self._closed = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._connections: set = set()
        self._peak_connections = 0
        self._slept = 0.0
        self._link_free_at = 0.0  # total_rate: when the shared link has sent all it was given
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._tmpdir: Path | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> OriginServer:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _HTTPServer(("127.0.0.1", 0), _Handler)
        server.origin = self
        if self.tls:
            self._tmpdir = Path(tempfile.mkdtemp(prefix="origin-tls-"))
            self.ca_path, cert_path, key_path = _make_certificates(self._tmpdir)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert_path, key_path)
            server.ssl_context = context
        self._server = server
        self.port = server.server_address[1]
        scheme = "https" if self.tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}/"
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05},
            name=f"origin-{self.port}", daemon=True,
        )
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
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._closed:  # handler threads end promptly once their sockets are shut
            self._closed.wait_for(lambda: not self._connections, timeout=5)
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self) -> OriginServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ content

    def url_for(self, name: str) -> str:
        return self.url + quote(_normalize_name(name), safe="/")

    @property
    def loop_url(self) -> str:
        return self.url.rstrip("/") + self.loop_path

    def put(self, name: str, data: bytes, *, etag: str | None = None,
            last_modified: float | None = None) -> None:
        """Add or replace a file. Default ETag: quoted sha1 of the content. Default
        Last-Modified: now, and always later than the replaced version's (putting the
        same bytes again keeps the old one)."""
        name = _normalize_name(name)
        data = bytes(data)
        if etag is None:
            etag = '"' + hashlib.sha1(data).hexdigest() + '"'
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
            self._files[name] = _File(data=data, etag=etag, last_modified=stamp)

    def set_pool(self, name: str, versions: list[bytes]) -> None:
        """Serve ``name`` from several backends in turn, each holding one of ``versions``
        (same ETag/Last-Modified policy as ``put``; turn validators off to mimic a pool
        that sends none)."""
        name = _normalize_name(name)
        self.put(name, versions[0])
        with self._lock:
            self._pools[name] = [bytes(v) for v in versions]
            self._pool_next[name] = 0

    def remove(self, name: str) -> None:
        with self._lock:
            self._files.pop(_normalize_name(name), None)

    def etag(self, name: str) -> str:
        return self._files[_normalize_name(name)].etag

    def last_modified(self, name: str) -> str:
        """The file's Last-Modified header value (an HTTP-date)."""
        return http_date(self._files[_normalize_name(name)].last_modified)

    def set_redirect(self, name: str, location: str, *, code: int = 302) -> None:
        """Persistently redirect requests for ``name`` (until ``clear_redirect``)."""
        with self._lock:
            self._redirects[_normalize_name(name)] = (location, code)

    def clear_redirect(self, name: str) -> None:
        with self._lock:
            self._redirects.pop(_normalize_name(name), None)

    # ------------------------------------------------------------------ faults & stats

    def add_fault(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Drop every fault not consumed yet."""
        with self._lock:
            self._faults.clear()

    @property
    def pending_faults(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def data_requests(self, name: str) -> list[RequestRecord]:
        name = _normalize_name(name)
        with self._lock:
            return [r for r in self.requests if r.method == "GET" and r.name == name]

    @property
    def bytes_sent(self) -> int:
        with self._lock:
            return sum(r.body_bytes_sent for r in self.requests)

    @property
    def peak_connections(self) -> int:
        """Most TCP connections open at the same time so far."""
        return self._peak_connections

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._connections)

    @property
    def throttle_slept(self) -> float:
        """Total seconds the ``rate`` throttle has slept."""
        return self._slept

    # ------------------------------------------------------------------ internals

    def _track(self, sock, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(sock)
                self._peak_connections = max(self._peak_connections, len(self._connections))
            else:
                self._connections.discard(sock)
                self._closed.notify_all()

    def _take_fault(self, *, method: str, name: str, ranged: bool) -> Fault | None:
        with self._lock:
            for index, fault in enumerate(self._faults):
                if fault.matches(method=method, name=name, ranged=ranged):
                    return self._faults.pop(index)
        return None

    def _handle(self, h: _Handler) -> None:
        method = h.command
        target = urlsplit(h.path).path
        name = _normalize_name(unquote(target, errors="replace"))
        record = RequestRecord(
            method=method, path=h.path, name=name,
            headers=Headers(list(h.headers.items())), client=h.client_address[:2],
        )
        with self._lock:
            self.requests.append(record)
        range_header = h.headers.get("Range")

        if target == self.loop_path or target.startswith(self.loop_path + "/"):
            self._send_simple(h, record, 302, extra={"Location": h.path})
            return
        if self.basic_auth is not None:
            import base64

            wanted = "Basic " + base64.b64encode(":".join(self.basic_auth).encode()).decode("ascii")
            if h.headers.get("Authorization") != wanted:
                self._send_simple(h, record, 401, extra={"WWW-Authenticate": 'Basic realm="origin"'})
                return
        limit = self.connection_limit
        if limit is not None and self.open_connections > limit:
            h.close_connection = True
            self._send_simple(h, record, self.connection_limit_status,
                              extra={"Retry-After": "1", "Connection": "close"})
            return

        if self.portal is not None:
            self._send_page(h, record, self.portal, "text/html; charset=utf-8")
            return
        fault = self._take_fault(method=method, name=name, ranged=range_header is not None)
        if fault is not None:
            record.fault = type(fault).__name__
        if isinstance(fault, WebPage):
            self._send_page(h, record, fault.body, fault.content_type)
            return
        if isinstance(fault, Delay):
            self._sleep(fault.seconds)
        if isinstance(fault, ChangeContent):
            self.put(name, fault.data)
        if isinstance(fault, Status):
            extra = dict(fault.headers or {})
            if fault.retry_after is not None:
                extra.setdefault("Retry-After", str(fault.retry_after))
            current = self._files.get(name)
            if fault.code == 416 and current is not None:
                extra.setdefault("Content-Range", f"bytes */{len(current.data)}")
            self._send_simple(h, record, fault.code, extra=extra)
            return
        if isinstance(fault, Redirect):
            self._send_simple(h, record, fault.code, extra={"Location": fault.location})
            return
        with self._lock:
            redirect = self._redirects.get(name)
            current = self._files.get(name)
            pool = self._pools.get(name)
            if pool is not None and method == "GET":
                index = self._pool_next[name]
                self._pool_next[name] = index + 1
                backend = pool[index % len(pool)]
                current = _File(data=backend, etag='"' + hashlib.sha1(backend).hexdigest() + '"',
                                last_modified=current.last_modified if current else int(time.time()))
        if redirect is not None:
            self._send_simple(h, record, redirect[1], extra={"Location": redirect[0]})
            return
        if current is None:
            self._send_simple(h, record, 404)
            return

        self._send_file(h, record, current, range_header, fault)

    def _send_file(self, h: _Handler, record: RequestRecord, current: _File,
                   range_header: str | None, fault: Fault | None) -> None:
        size = len(current.data)
        use_range = range_header is not None and self.accept_ranges and not self.ignore_range
        if use_range and not isinstance(fault, IgnoreRange):
            if_range = h.headers.get("If-Range")
            if if_range is not None and not self._if_range_matches(if_range, current):
                use_range = False
        else:
            use_range = False
        span = _parse_range(range_header, size) if use_range else None

        headers: dict[str, str] = {"Content-Type": "application/octet-stream"}
        if self.accept_ranges:
            headers["Accept-Ranges"] = "bytes"
        if self.send_etag:
            headers["ETag"] = current.etag
        if self.send_last_modified:
            headers["Last-Modified"] = http_date(current.last_modified)

        if span == "unsatisfiable":
            headers["Content-Range"] = f"bytes */{size}"
            self._send_simple(h, record, 416, extra=headers)
            return

        if span is None:
            status, start, end = 200, 0, size - 1
        else:
            status, (start, end) = 206, span
        if isinstance(fault, WrongContentRange):
            status = 206
            new_start = start + fault.shift
            if new_start >= size or new_start < 0:
                new_start = max(0, start - fault.shift)
            length = end - start + 1
            start, end = new_start, min(size - 1, new_start + length - 1)
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        body = current.data[start:end + 1]

        if isinstance(fault, WrongBytes) and body:
            corrupted = bytearray(body)
            corrupted[len(corrupted) // 2] ^= 0xFF
            body = bytes(corrupted)
        if isinstance(fault, Gzip):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"

        length = len(body)
        if isinstance(fault, LongContentLength):
            length += fault.extra
        headers["Content-Length"] = str(length)

        record.status = status
        h.send_response(status)
        for key, value in headers.items():
            h.send_header(key, value)
        h.end_headers()
        if h.command == "HEAD":
            return

        if isinstance(fault, CloseAfter):
            self._write_body(h, record, body[:fault.n])
            self._drop(h, reset=fault.reset)
        elif isinstance(fault, StallAfter):
            self._write_body(h, record, body[:fault.n])
            self._sleep(fault.seconds)
            self._drop(h)
        elif isinstance(fault, LongContentLength):
            self._write_body(h, record, body)
            self._drop(h)
        else:
            self._write_body(h, record, body)

    def _if_range_matches(self, value: str, current: _File) -> bool:
        """Strong ETag equality, or HTTP-date equal to Last-Modified; a validator the
        server does not send never matches."""
        value = value.strip()
        if value.startswith('"') or value.startswith("W/"):
            return (self.send_etag and value == current.etag
                    and not current.etag.startswith("W/"))
        date = _parse_http_date(value)
        return self.send_last_modified and date is not None and date == current.last_modified

    def _send_page(self, h: _Handler, record: RequestRecord, body: bytes, content_type: str | None) -> None:
        """200 with ``body``, whatever was asked (Range included): a portal's page."""
        record.status = 200
        h.send_response(200)
        if content_type is not None:
            h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Cache-Control", "no-store")
        h.end_headers()
        if h.command != "HEAD":
            self._write_body(h, record, body)

    def _send_simple(self, h: _Handler, record: RequestRecord, code: int, *,
                     extra: dict[str, str] | None = None) -> None:
        body = f"{code} {h.responses.get(code, ('',))[0]}\n".encode()
        record.status = code
        h.send_response(code)
        headers = {"Content-Type": "text/plain; charset=utf-8"}
        headers.update(extra or {})
        headers["Content-Length"] = str(len(body))
        for key, value in headers.items():
            h.send_header(key, value)
        h.end_headers()
        if h.command != "HEAD":
            self._write_body(h, record, body)

    def _write_body(self, h: _Handler, record: RequestRecord, body: bytes) -> None:
        rate = self.rate
        slowest = min(r for r in (rate, self.total_rate, 10 * CHUNK) if r)
        chunk = max(1, min(CHUNK, slowest // 10))
        started = time.monotonic()
        sent = 0
        view = memoryview(body)
        while sent < len(body):
            if self._stopping.is_set():
                raise _Stop()
            piece = view[sent:sent + chunk]
            # Count before writing: a client that has read the last byte must already
            # see it in the record (a failed write leaves the count as attempted).
            record.body_bytes_sent += len(piece)
            try:
                h.wfile.write(piece)
            except OSError as exc:
                h.close_connection = True
                raise _Stop() from exc
            sent += len(piece)
            self._share_link(len(piece))
            if rate:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    with self._lock:
                        self._slept += ahead
                    self._sleep(ahead)

    def _share_link(self, size: int) -> None:
        """With ``total_rate``: wait until the shared link has carried ``size`` more bytes."""
        total = self.total_rate
        if not total:
            return
        with self._lock:
            now = time.monotonic()
            self._link_free_at = max(self._link_free_at, now) + size / total
            wait = self._link_free_at - now
            self._slept += wait
        self._sleep(wait)

    def _sleep(self, seconds: float) -> None:
        if self._stopping.wait(seconds):
            raise _Stop()

    @staticmethod
    def _drop(h: _Handler, *, reset: bool = False) -> None:
        h.close_connection = True
        sock = h.connection
        try:
            if reset:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            else:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _parse_range(header: str, size: int):
    """Return (start, end) inclusive, "unsatisfiable", or None (ignore the header:
    invalid syntax, other unit, or several ranges)."""
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or not spec or "," in spec:
        return None
    first, dash, last = spec.strip().partition("-")
    first, last = first.strip(), last.strip()
    if not dash or (first and not first.isdigit()) or (last and not last.isdigit()):
        return None
    if not first:
        if not last:
            return None
        suffix = int(last)
        if suffix == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - suffix), size - 1
    start = int(first)
    end = int(last) if last else size - 1
    if start >= size or end < start:
        return "unsatisfiable"
    return start, min(end, size - 1)


# --------------------------------------------------------------------------- TLS


def _make_certificates(directory: Path) -> tuple[Path, Path, Path]:
    """A throwaway CA plus a leaf for 127.0.0.1/localhost signed by it (needs the
    ``cryptography`` package). Returns (ca_pem, leaf_chain_pem, leaf_key_pem)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = _dt.datetime.now(_dt.timezone.utc)
    not_before, not_after = now - _dt.timedelta(days=1), now + _dt.timedelta(days=7)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "prefetch test CA")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before).not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True,
            crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before).not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=False,
            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    pem = serialization.Encoding.PEM
    ca_path = directory / "ca.pem"
    cert_path = directory / "server.pem"
    key_path = directory / "server.key"
    ca_path.write_bytes(ca_cert.public_bytes(pem))
    cert_path.write_bytes(cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    key_path.write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return ca_path, cert_path, key_path


# --------------------------------------------------------------------------- silent


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never sends a byte (nor reads one).
    For connect/read-timeout tests: ``url``, ``connections`` (how many were accepted)."""

    def __init__(self) -> None:
        self.url = ""
        self.port = 0
        self._sock: socket.socket | None = None
        self._accepted: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._accepted)

    def start(self) -> SilentServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self._thread = threading.Thread(target=self._accept_loop, daemon=True,
                                        name=f"silent-{self.port}")
        self._thread.start()
        return self

    def url_for(self, name: str) -> str:
        return self.url + quote(_normalize_name(name), safe="/")

    def _accept_loop(self) -> None:
        sock = self._sock
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with self._lock:
                self._accepted.append(conn)

    def stop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            accepted, self._accepted = self._accepted, []
        for conn in accepted:
            conn.close()

    def __enter__(self) -> SilentServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
