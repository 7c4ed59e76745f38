"""Connections reset together (a server restarted, a NAT or proxy dropping its table) are one
failure of the transfer, not one per connection: it backs off and resumes. Each connection's
failure used to count as a retry in a row, so eight connections reset at once made the eighth's
backoff exceed the time budget and the download "gave up after 0s without a byte", exit 3."""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import threading

from tests.conftest import run_cli
from tests.nginx import NginxServer


class ResettingForwarder:
    """A TCP forwarder to ``port`` that resets every open client connection once, when
    ``after`` bytes have gone to the clients in all and ``together`` connections are open;
    then it forwards as before."""

    def __init__(self, port: int, *, after: int, together: int) -> None:
        self.port_to, self.after, self.together = port, after, together
        self.sent = 0
        self.reset_done = threading.Event()
        self.lock = threading.Lock()
        self.clients: list[socket.socket] = []
        self.resets = 0

    def __enter__(self) -> "ResettingForwarder":
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.close()

    def url_for(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.port_to))
            with self.lock:
                self.clients.append(client)
            threading.Thread(target=self._pipe, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, to_client: bool) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
                if to_client:
                    self._count(len(data))
        except OSError:
            pass
        with self.lock:
            if src in self.clients:
                self.clients.remove(src)
            if dst in self.clients:
                self.clients.remove(dst)
        for s in (src, dst):
            try:
                s.close()
            except OSError:
                pass

    def _count(self, n: int) -> None:
        with self.lock:
            self.sent += n
            if self.reset_done.is_set() or self.sent < self.after or len(self.clients) < self.together:
                return
            self.reset_done.set()
            victims, self.clients = self.clients, []
        for client in victims:  # RST, not FIN: SO_LINGER 0
            try:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                client.close()
                self.resets += 1
            except OSError:
                pass


def test_connections_reset_together_are_retried_not_given_up(home, tmp_path):
    data = os.urandom(16 << 20)
    www = tmp_path / "www"
    www.mkdir()
    (www / "big.bin").write_bytes(data)
    with NginxServer(www, limit_rate="256k") as ng, \
            ResettingForwarder(ng.port, after=1 << 20, together=10) as fwd:
        proc = run_cli("get", fwd.url_for("big.bin"), "-o", str(tmp_path / "big.bin"), "--connections", "12",
                       timeout=180)
        resets = fwd.resets
    assert fwd.reset_done.is_set() and resets >= 10, resets  # the case: many connections reset at once
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert hashlib.sha256((tmp_path / "big.bin").read_bytes()).digest() == hashlib.sha256(data).digest()


def test_a_wave_counts_once_and_a_failing_server_still_ends_the_transfer():
    """The policy itself: twelve tries begun before the first failure are one attempt; tries
    begun after it (the retries) count again, up to --retries."""
    import time

    import pytest

    from prefetch.engine.options import TransferOptions
    from prefetch.engine.retry import RetryPolicy
    from prefetch.errors import NetworkError
    from prefetch.net.failures import Failure

    policy = RetryPolicy(TransferOptions(max_attempts=3, backoff_base=0.001, backoff_cap=0.001, timeout=1e6))
    began = time.monotonic()
    assert [policy.failed(began) for _ in range(12)] == [1] * 12  # one wave
    for attempt in (2, 3, 4):
        retried = time.monotonic()  # (a retry begins after the wave's first failure)
        assert policy.failed(retried) == attempt
        if attempt <= 3:
            policy.delay(attempt, None, name="f", message="reset", kind=Failure.BROKEN)
    with pytest.raises(NetworkError, match="gave up after 3 retries"):
        policy.delay(4, None, name="f", message="reset", kind=Failure.BROKEN)
