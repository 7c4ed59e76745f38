"""Raw socket servers for the time-bound tests (a helper module, not tests)."""

from __future__ import annotations

import socket
import threading


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SlowHeadServer:
    """Answers every connection with a response head sent one byte per ``interval`` seconds,
    for ever (an endless header line): only a deadline on the whole head ends the wait."""

    def __init__(self, *, interval: float = 0.1) -> None:
        self.interval = interval
        self.bytes_sent = 0
        self._stop = threading.Event()
        self._sock: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self.url = ""

    def __enter__(self) -> "SlowHeadServer":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.settimeout(0.2)
        self._sock = sock
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            thread = threading.Thread(target=self._trickle, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _trickle(self, conn: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nX-Pad: "
        try:
            i = 0
            while not self._stop.wait(self.interval):
                conn.sendall(head[i:i + 1] if i < len(head) else b"a")
                self.bytes_sent += 1
                i += 1
        except OSError:
            pass
        finally:
            conn.close()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._sock is not None:
            self._sock.close()
        for thread in self._threads:
            thread.join(timeout=2)
