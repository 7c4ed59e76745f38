"""The test suite's in-process origins: the demo's ``OriginServer`` (``prefetch.demo.origin``:
HTTP/1.1, Range and If-Range as nginx answers them, ETag/Last-Modified, ``rate``,
``CloseAfter``) with every fault switch the tests need, and ``SilentServer``.

On top of the demo origin, ``OriginServer`` here has:

* the one-shot faults of ``tests.origin_faults`` (``add_fault``, consumed in FIFO order by
  the next request that matches the fault's ``path`` / ``method`` / ``only_ranged``);
* persistent switches (attributes): ``ignore_range``, ``total_rate`` (bytes/s shared by
  every response: one link that more connections cannot widen), ``connection_limit``
  (more open connections than this get ``connection_limit_status``, 503 with
  ``Retry-After: 1`` by default, as mirrors that cap connections per client do),
  ``send_etag``, ``send_last_modified``, ``accept_ranges``, ``basic_auth`` ((user,
  password): 401 unless the request has them); persistent redirects (``set_redirect``);
  ``loop_path`` always redirects to itself; ``portal`` (bytes: every request gets
  ``200 text/html`` with that page, as a captive portal or block page answers);
  ``set_pool(name, versions)`` (each request for ``name`` is served by the next of
  several backends holding different versions, as an out-of-sync pool does);
* a record of every request (``requests``: method, raw path, headers, client port,
  status, body bytes, fault applied) and statistics (``data_requests``,
  ``peak_connections``, ``open_connections``, ``throttle_slept``);
* TLS (``tls=True``, needs ``cryptography``): a throwaway CA and a leaf certificate for
  127.0.0.1 and localhost are made at ``start()``; ``ca_path`` is the CA's PEM file, for
  ``verify=`` / ``REQUESTS_CA_BUNDLE``.

A redirect loop: request ``server.loop_url`` (every path under ``loop_path`` answers 302
to itself), or add ``Redirect(server.url_for(name), path=name)`` several times.
"""

from __future__ import annotations

import base64
import gzip
import shutil
import ssl
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from prefetch.demo import origin as demo
from prefetch.demo.origin import Exchange, Fault, Reply, StoredFile, http_date, normalize_name
from tests import origin_faults as faults
from tests.origin_faults import *  # noqa: F401,F403 - the faults belong to this module's API
from tests.origin_silent import SilentServer
from tests.origin_tls import make_certificates

__all__ = [*faults.__all__, "OriginServer", "RequestRecord", "SilentServer", "http_date"]


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


@dataclass(kw_only=True)
class RequestRecord(Exchange):
    """One request as the server saw it (``Exchange``: method, name, status,
    body_bytes_sent), with what the tests look at besides."""

    path: str  # raw request target, e.g. "/a%20b.bin?x=1"
    headers: Headers
    client: tuple[str, int]  # (host, port): one value per TCP connection
    fault: str | None = None  # class name of the fault applied, if any
    started: float = field(default_factory=time.monotonic)

    @property
    def range(self) -> str | None:
        return self.headers.get("Range")


class OriginServer(demo.OriginServer):
    """The demo origin with the test suite's switches; see the module docstring."""

    loop_path = "/__loop__"

    def __init__(self, *, tls: bool = False):
        super().__init__()
        self.tls = tls
        self.scheme = "https" if tls else "http"
        # persistent switches
        self.ignore_range = False
        self.total_rate: int | None = None
        self.connection_limit: int | None = None
        self.connection_limit_status = 503
        self.send_etag = True
        self.send_last_modified = True
        self.accept_ranges = True
        self.basic_auth: tuple[str, str] | None = None  # (user, password): 401 without them
        self.portal: bytes | None = None

        self.ca_path: Path | None = None
        self._redirects: dict[str, tuple[str, int]] = {}
        self._pools: dict[str, list[bytes]] = {}
        self._pool_next: dict[str, int] = {}
        self._slept = 0.0
        self._link_free_at = 0.0  # total_rate: when the shared link has sent all it was given
        self._ssl_context: ssl.SSLContext | None = None
        self._tmpdir: Path | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self, port: int = 0) -> OriginServer:
        if self.tls and self._server is None:
            self._tmpdir = Path(tempfile.mkdtemp(prefix="origin-tls-"))
            self.ca_path, cert_path, key_path = make_certificates(self._tmpdir)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert_path, key_path)
            self._ssl_context = context
        return super().start(port)

    def stop(self) -> None:
        super().stop()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    # ------------------------------------------------------------------ content

    @property
    def loop_url(self) -> str:
        return self.url.rstrip("/") + self.loop_path

    def set_pool(self, name: str, versions: list[bytes]) -> None:
        """Serve ``name`` from several backends in turn, each holding one of ``versions``
        (same ETag/Last-Modified policy as ``put``; turn validators off to mimic a pool
        that sends none)."""
        name = normalize_name(name)
        self.put(name, versions[0])
        with self._lock:
            self._pools[name] = [bytes(v) for v in versions]
            self._pool_next[name] = 0

    def remove(self, name: str) -> None:
        with self._lock:
            self._files.pop(normalize_name(name), None)

    def etag(self, name: str) -> str:
        return self._files[normalize_name(name)].etag

    def last_modified(self, name: str) -> str:
        """The file's Last-Modified header value (an HTTP-date)."""
        return http_date(self._files[normalize_name(name)].last_modified)

    def set_redirect(self, name: str, location: str, *, code: int = 302) -> None:
        """Persistently redirect requests for ``name`` (until ``clear_redirect``)."""
        with self._lock:
            self._redirects[normalize_name(name)] = (location, code)

    def clear_redirect(self, name: str) -> None:
        with self._lock:
            self._redirects.pop(normalize_name(name), None)

    # ------------------------------------------------------------------ faults & stats

    def clear_faults(self) -> None:
        """Drop every fault not consumed yet."""
        with self._lock:
            self._faults.clear()

    @property
    def pending_faults(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def data_requests(self, name: str) -> list[RequestRecord]:
        name = normalize_name(name)
        with self._lock:
            return [r for r in self.requests if r.method == "GET" and r.name == name]

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
        """Total seconds the ``rate`` and ``total_rate`` throttles have slept."""
        return self._slept

    # ------------------------------------------------------------------ the demo origin's hooks

    def _wrap(self, sock):
        if self._ssl_context is None:
            return sock
        sock.settimeout(10)
        try:
            return self._ssl_context.wrap_socket(sock, server_side=True)
        except (OSError, ssl.SSLError):
            return None

    def _exchange(self, h, name: str) -> RequestRecord:
        return RequestRecord(method=h.command, name=name, path=h.path,
                             headers=Headers(list(h.headers.items())), client=h.client_address[:2])

    def _respond(self, h, ex: RequestRecord) -> None:
        if self._refused(h, ex):
            return
        if self.portal is not None:
            self._send_page(h, ex, self.portal, "text/html; charset=utf-8")
            return
        method, name = ex.method, ex.name
        fault = self._take_fault(method=method, name=name, ranged=ex.range is not None)
        if fault is not None:
            ex.fault = type(fault).__name__
        if isinstance(fault, faults.WebPage):
            self._send_page(h, ex, fault.body, fault.content_type)
            return
        if isinstance(fault, faults.Delay):
            self._sleep(fault.seconds)
        if isinstance(fault, faults.ChangeContent):
            self.put(name, fault.data)
        if isinstance(fault, faults.Status):
            extra = dict(fault.headers or {})
            if fault.retry_after is not None:
                extra.setdefault("Retry-After", str(fault.retry_after))
            current = self._files.get(name)
            if fault.code == 416 and current is not None:
                extra.setdefault("Content-Range", f"bytes */{len(current.data)}")
            self._send_simple(h, ex, fault.code, extra=extra)
            return
        if isinstance(fault, faults.Redirect):
            self._send_simple(h, ex, fault.code, extra={"Location": fault.location})
            return
        with self._lock:
            redirect = self._redirects.get(name)
            current = self._files.get(name)
            pool = self._pools.get(name)
            if pool is not None and method == "GET":
                index = self._pool_next[name]
                self._pool_next[name] = index + 1
                backend = pool[index % len(pool)]
                current = StoredFile(backend, demo.default_etag(backend),
                                     current.last_modified if current else int(time.time()))
        if redirect is not None:
            self._send_simple(h, ex, redirect[1], extra={"Location": redirect[0]})
        elif current is None:
            self._send_simple(h, ex, 404)
        else:
            self._send_file(h, ex, current, fault)

    def _file_headers(self, current: StoredFile) -> dict[str, str]:
        headers = super()._file_headers(current)
        for switch, header in ((self.accept_ranges, "Accept-Ranges"), (self.send_etag, "ETag"),
                               (self.send_last_modified, "Last-Modified")):
            if not switch:
                del headers[header]
        return headers

    def _honours_range(self, fault: Fault | None) -> bool:
        return self.accept_ranges and not self.ignore_range and not isinstance(fault, faults.IgnoreRange)

    def _shape(self, reply: Reply, current: StoredFile, fault: Fault | None) -> None:
        if isinstance(fault, faults.WrongContentRange):
            start = reply.start + fault.shift
            if start >= reply.size or start < 0:
                start = max(0, reply.start - fault.shift)
            end = min(reply.size - 1, start + reply.end - reply.start)
            reply.status, reply.start, reply.end = 206, start, end
            reply.body = current.data[start:end + 1]
        elif isinstance(fault, faults.WrongBytes) and reply.body:
            corrupted = bytearray(reply.body)
            corrupted[len(corrupted) // 2] ^= 0xFF
            reply.body = bytes(corrupted)
        elif isinstance(fault, faults.Gzip):
            reply.body = gzip.compress(reply.body)
            reply.headers["Content-Encoding"] = "gzip"
        elif isinstance(fault, faults.LongContentLength):
            reply.headers["Content-Length"] = str(len(reply.body) + fault.extra)

    def _write_reply(self, h, ex: RequestRecord, body: bytes, fault: Fault | None) -> None:
        if isinstance(fault, faults.StallAfter):
            self._write_body(h, ex, body[:fault.n])
            self._sleep(fault.seconds)
            self._drop(h)
        elif isinstance(fault, faults.LongContentLength):
            self._write_body(h, ex, body)
            self._drop(h)
        else:
            super()._write_reply(h, ex, body, fault)

    def _chunk_size(self) -> int:
        chunk = super()._chunk_size()
        return min(chunk, max(1, self.total_rate // 10)) if self.total_rate else chunk

    def _after_write(self, size: int) -> None:
        """With ``total_rate``: wait until the shared link has carried ``size`` more bytes."""
        total = self.total_rate
        if not total:
            return
        with self._lock:
            now = time.monotonic()
            self._link_free_at = max(self._link_free_at, now) + size / total
            wait = self._link_free_at - now
        self._throttle(wait)

    def _throttle(self, seconds: float) -> None:
        with self._lock:
            self._slept += seconds
        super()._throttle(seconds)

    # ------------------------------------------------------------------ internals

    def _refused(self, h, ex: RequestRecord) -> bool:
        """Answer the loop path, a missing login or one connection too many; True if so."""
        target = urlsplit(h.path).path
        if target == self.loop_path or target.startswith(self.loop_path + "/"):
            self._send_simple(h, ex, 302, extra={"Location": h.path})
            return True
        if self.basic_auth is not None:
            wanted = "Basic " + base64.b64encode(":".join(self.basic_auth).encode()).decode("ascii")
            if h.headers.get("Authorization") != wanted:
                self._send_simple(h, ex, 401, extra={"WWW-Authenticate": 'Basic realm="origin"'})
                return True
        limit = self.connection_limit
        if limit is not None and self.open_connections > limit:
            h.close_connection = True
            self._send_simple(h, ex, self.connection_limit_status,
                              extra={"Retry-After": "1", "Connection": "close"})
            return True
        return False

    def _send_page(self, h, ex: RequestRecord, body: bytes, content_type: str | None) -> None:
        """200 with ``body``, whatever was asked (Range included): a portal's page."""
        headers = {} if content_type is None else {"Content-Type": content_type}
        headers.update({"Content-Length": str(len(body)), "Cache-Control": "no-store"})
        self._send(h, ex, 200, headers, body)
