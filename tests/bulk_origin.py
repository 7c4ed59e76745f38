"""A keep-alive origin for the bulk lane's tests (tests/test_bulk*.py): answers each request on
a connection in turn (pipelined requests too), by path, and can misbehave for chosen files.

``BulkOrigin(files, tricks)``: ``files`` name -> bytes, served as ``206`` to a ``Range: bytes=0-``
request (``200`` without one), with an ETag. ``tricks`` name -> what that file's answer does
instead; ``once-`` tricks misbehave at the file's first request only (the file is served
right after), the others every time:

* ``404``: an HTML 404 page; ``portal``: a captive portal's HTML page as 200;
* ``redirect``: a 302 to ``/moved/NAME`` (which serves the file); ``503``: a 503 (every time);
* ``once-short``: the head promises the whole file, 100 bytes less follow, then a close;
* ``once-shortnext``: 100 bytes less than its ``Content-Length``, and the next answer right
  after (its head's first bytes then look like the end of this body);
* ``once-long``: 50 bytes more than its ``Content-Length`` (the next answer's bytes shifted);
* ``once-range``: a 206 for bytes 100- (not the range asked for);
* ``once-reset``: the connection is reset instead of an answer;
* ``once-gzip``: the body with ``Content-Encoding: gzip`` (not what was asked).

``tls_dir``: serve https with a throwaway CA written there (``ca_path``).

``log``: (connection number, path, pipelined, lane) per request, ``pipelined`` when the next
request's bytes had already arrived as this one was read, ``lane`` when it asked the bulk
lane's range (``bytes=0-262143``; the usual path asks for its first 1 MiB); ``delay``: seconds
before each answer.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import Counter

from tests.keepalive import Listener


class BulkOrigin(Listener):
    def __init__(self, files: dict[str, bytes], tricks: dict[str, str] | None = None, *, delay: float = 0.0,
                 tls_dir=None) -> None:
        self.files = files
        self.ca_path = None
        if tls_dir is not None:  # https, with a throwaway CA (``ca_path``) in ``tls_dir``
            import ssl

            from tests.origin_tls import make_certificates

            self.ca_path, chain, key = make_certificates(tls_dir)
            self.tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls_context.load_cert_chain(chain, key)
        self.tricks = dict(tricks or {})
        self.delay = delay
        self.asked: Counter = Counter()
        self.log: list[tuple[int, str, bool, bool]] = []
        self._lock = threading.Lock()
        self.listen()
        self.base = f"{'https' if tls_dir is not None else 'http'}://127.0.0.1:{self.port}"

    def url_for(self, name: str) -> str:
        return f"{self.base}/{name}"

    def __enter__(self) -> "BulkOrigin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def connections(self) -> int:
        return len({c for c, *_ in self.log})

    def pipelined(self) -> int:
        return sum(p for _, _, p, _ in self.log)

    def lane(self, name: str | None = None) -> int:
        """Requests that asked the bulk lane's range (for ``name`` only, when given)."""
        return sum(lane for _, path, _, lane in self.log if name is None or path == "/" + name)

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            for head, ahead in self.heads_ahead(conn):
                path = head.split(b" ", 2)[1].decode()
                ranged = b"\r\nrange: bytes=0-" in head.lower()
                lane = b"\r\nrange: bytes=0-262143\r\n" in head.lower() + b"\r\n"
                with self._lock:
                    self.log.append((number, path, ahead, lane))
                if self.delay:
                    time.sleep(self.delay)
                try:
                    if not self._answer(conn, path.lstrip("/"), ranged):
                        return
                except OSError:
                    return

    def _answer(self, conn: socket.socket, name: str, ranged: bool) -> bool:
        moved = name.startswith("moved/")
        name = name.removeprefix("moved/")
        with self._lock:
            first = self.asked[name] == 0
            self.asked[name] += 1
        trick = None if moved else self.tricks.get(name)
        if trick and trick.startswith("once-") and not first:
            trick = None
        data = self.files.get(name)
        if trick == "404" or data is None:
            page = b"<html><body>not found</body></html>"
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(page), page))
            return True
        if trick == "portal":
            page = b"<!DOCTYPE html><html><head><title>Log in</title></head><body>Wi-Fi login</body></html>"
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s"
                         % (len(page), page))
            return True
        if trick == "503":
            conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n")
            return True
        if trick == "redirect":
            conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /moved/%s\r\nContent-Length: 0\r\n\r\n" % name.encode())
            return True
        if trick == "once-reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
            return False
        body, first_byte, extra = data, 0, b""
        if trick == "once-range":
            body, first_byte = data[100:], 100
        head = [b"HTTP/1.1 206 Partial Content" if ranged or first_byte else b"HTTP/1.1 200 OK",
                b"Content-Type: application/octet-stream", b"Content-Length: %d" % len(body), b'ETag: "v1"']
        if ranged or first_byte:
            head.append(b"Content-Range: bytes %d-%d/%d" % (first_byte, len(data) - 1, len(data)))
        if trick == "once-gzip":
            head.append(b"Content-Encoding: gzip")
        if trick == "once-long":
            extra = b"x" * 50
        if trick == "once-short":
            conn.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body[:-100])
            conn.shutdown(socket.SHUT_WR)
            return False
        if trick == "once-shortnext":
            body = body[:-100]
        conn.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body + extra)
        return True
