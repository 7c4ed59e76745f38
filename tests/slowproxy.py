"""A TCP proxy on loopback that forwards to ``upstream`` with the answers slowed to ``rate``
bytes/s per connection (settable while running): a slow route to a real server (S3 signatures stay valid: the
client signs for the proxy's address, which is the Host header the server receives)."""

from __future__ import annotations

import socket
import threading
import time


class SlowProxy:
    def __init__(self, upstream_port: int, *, rate: int, up_rate: int | None = None) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.rate = rate
        self.up_rate = up_rate  # bytes/s of requests (uploads), None: unlimited
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, throttled: bool) -> None:
        """Copy src to dst; answers (``throttled``) at ``self.rate``, read each time (it may change)."""
        start, sent = time.monotonic(), 0
        try:
            while True:
                rate = self.rate if throttled else self.up_rate
                data = src.recv(16384 if rate is None else min(16384, max(1024, rate // 10)))
                if not data:
                    break
                dst.sendall(data)
                if rate:
                    sent += len(data)
                    ahead = sent / rate - (time.monotonic() - start)
                    if ahead > 0:
                        time.sleep(ahead)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def close(self) -> None:
        self._closing = True
        self._sock.close()

    def __enter__(self) -> "SlowProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
