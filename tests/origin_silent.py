"""A TCP server that accepts connections and never answers: for timeout tests."""

from __future__ import annotations

import socket
import threading

from prefetch.demo.origin import url_under


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
        return url_under(self.url, name)

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
