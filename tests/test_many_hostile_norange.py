"""A server without Range support whose connections break mid-body (#19's hostile review).

Each retry has to start from byte 0 (nothing can resume there); that is a broken network,
not a file that changed. Before, the fourth such retry ended the download as "the remote file
kept changing" (exit 4, integrity: "check the hash or the mirror") while the retries
allowed more; now such starts from 0 are bounded by --retries and giving up is exit 3."""

from __future__ import annotations

import os
import socket

from tests.keepalive import Listener


class BreaksThenServes(Listener):
    """Answers 200 with the whole body (Range ignored); the first ``breaks`` answers close the
    connection after a third of the body."""

    def __init__(self, body: bytes, breaks: int) -> None:
        self.body, self.breaks, self.served = body, breaks, 0
        self.ranges: list[str | None] = []
        self.listen()
        self.base = f"http://127.0.0.1:{self.port}"

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            head = next(self.heads(conn), None)
            if head is None:
                return
            head = head.decode()
            self.ranges.append(next((line.split(":", 1)[1].strip() for line in head.split("\r\n")
                                     if line.lower().startswith("range:")), None))
            self.served += 1
            answer = (f"HTTP/1.1 200 OK\r\nContent-Length: {len(self.body)}\r\nETag: \"v1\"\r\n"
                      f"Connection: close\r\n\r\n").encode() + self.body
            if self.served <= self.breaks:
                answer = answer[:len(answer) - 2 * len(self.body) // 3]
            conn.sendall(answer)


def _get(cli, server, tmp_path, retries: int):
    out = tmp_path / "out" / "x.bin"
    return out, cli("get", f"{server.base}/x.bin", "-o", str(out), "--retries", str(retries))


def test_breaks_within_the_retries_end_in_the_file(home, tmp_path, cli, monkeypatch):
    monkeypatch.setenv("PREFETCH_BACKOFF", "0.01")
    body = os.urandom(300_000)
    server = BreaksThenServes(body, breaks=10)  # (5 broken tries: each retry's answer is asked again from 0)
    try:
        out, proc = _get(cli, server, tmp_path, retries=8)
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == body
    assert server.served == 11 and server.ranges[1:] == [None] * 10, "each retry a plain GET (from byte 0)"


def test_breaks_beyond_the_retries_are_a_network_failure(home, tmp_path, cli, monkeypatch):
    monkeypatch.setenv("PREFETCH_BACKOFF", "0.01")
    server = BreaksThenServes(os.urandom(300_000), breaks=1000)
    try:
        out, proc = _get(cli, server, tmp_path, retries=3)
    finally:
        server.close()
    assert proc.returncode == 3, proc.stderr
    assert "kept changing" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1 and "Range" in proc.stderr, proc.stderr
    assert not out.exists()
    assert "gave up after 4 starts from byte 0" in proc.stderr, proc.stderr  # the first try and --retries 3 more
    assert server.served <= 2 * (3 + 1) + 1, "bounded by --retries (a retry's answer from byte 0 is asked again)"
