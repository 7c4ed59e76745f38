"""A host that is down for a whole list (#19): a server that answers every request 503 (or
500), or a port nobody listens on. One file uses its retries; the files after it give up at
their first failure while nothing came from the host since, instead of each waiting through
its own retries (2,000 files x ~90 s of backoff at the defaults). A host that delivers again
gives its files their retries back."""

from __future__ import annotations

import os
import socket
import threading

import pytest

from tests.keepalive import KeepAliveServer, Listener

FILES = 40
RETRIES = 8
BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"


@pytest.fixture
def quick_backoff(monkeypatch):
    monkeypatch.setenv("PREFETCH_BACKOFF", "0.01")
    monkeypatch.setenv("PREFETCH_BACKOFF_CAP", "0.02")


def _listing(tmp_path, base: str, count: int = FILES):
    listing = tmp_path / "urls.txt"
    listing.write_text("".join(f"{base}/f{i:03d}.bin\n" for i in range(count)))
    return listing


@pytest.mark.parametrize("status", [b"503 Service Unavailable", b"500 Internal Server Error"])
def test_a_host_down_costs_a_list_one_request_a_file(home, tmp_path, cli, quick_backoff, status):
    down = KeepAliveServer([BUSY.replace(b"503 Service Unavailable", status)])
    try:
        out = tmp_path / "out"
        proc = cli("get", "-i", str(_listing(tmp_path, down.base)), "-P", str(out), "--host-connections", "2",
                   "--retries", str(RETRIES), "-q")
    finally:
        down.close()
    assert proc.returncode == 3, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error: ")]
    # Each file failed; those that failed the same way past the first few are one line naming them.
    assert "Traceback" not in proc.stderr
    shown = [e for e in errors if not e.startswith("prefetch: error: ... and ")]
    counted = [e for e in errors if e.startswith("prefetch: error: ... and ")]
    assert len(counted) == 1 and f"and {FILES - len(shown)} more files failed the same way" in counted[0], errors
    assert "gave up after 8 retries" in proc.stderr, "the first files used their retries"
    assert "not retried: another file to this host just gave up" in proc.stderr
    assert not out.exists() or not [p for p in out.iterdir()], "nothing placed, nothing left"
    # 2 files in flight use their 9 tries; each later file one request (before: 9 each, 360).
    assert down.served <= 2 * (RETRIES + 1) + FILES, down.served


def test_a_host_that_delivers_again_gives_its_files_their_retries_back(home, tmp_path, cli, quick_backoff):
    """Down for the first file's 9 tries, then a 503 before each good answer: once a file came
    from the host again, a file's one 503 is retried, not given up at once."""
    good = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"x\"\r\n\r\nhello"
    flaky = KeepAliveServer([BUSY] * (RETRIES + 1) + [good, BUSY] * 20 + [good])
    try:
        out = tmp_path / "out"
        proc = cli("get", "-i", str(_listing(tmp_path, flaky.base, 8)), "-P", str(out), "--host-connections", "1",
                   "--retries", str(RETRIES), "-q")
    finally:
        flaky.close()
    assert proc.returncode == 3, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error: ")]
    assert len(errors) == 1 and "f000.bin: gave up after 8 retries" in errors[0], proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [f"f{i:03d}.bin" for i in range(1, 8)]


def test_a_port_nobody_listens_on_gives_up_a_file_at_a_time(home, tmp_path, cli):
    """A refused connection: the first file's --timeout third, then the rest at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # (closed: nothing listens there)
    out = tmp_path / "out"
    proc = cli("get", "-i", str(_listing(tmp_path, f"http://127.0.0.1:{port}", 30)), "-P", str(out),
               "--host-connections", "2", "--timeout", "1.5", "-q")
    assert proc.returncode == 3, proc.stderr
    # (The first few such files are named one by one, the rest counted in one line: they failed the same way.)
    import re

    counted = sum(int(n) for n in re.findall(r"\.\.\. and (\d+) more files failed the same way", proc.stderr))
    assert proc.stderr.count("not retried: another file to this host just gave up") + counted >= 20, proc.stderr


class BigAndBroken(Listener):
    """``/big.bin``: its first answer sends a third of the body, waits until ``/bad.bin`` was
    asked ``RETRIES + 1`` times (that file gave up), then closes; later answers are whole.
    ``/bad.bin``: 500 always."""

    def __init__(self, body: bytes) -> None:
        self.body, self.bad, self.big = body, 0, 0
        self.bad_gave_up = threading.Event()
        self.listen()
        self.base = f"http://127.0.0.1:{self.port}"

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            for head in self.heads(conn):
                if b" /bad.bin " in head.split(b"\r\n")[0]:
                    self.bad += 1
                    if self.bad >= RETRIES + 1:
                        self.bad_gave_up.set()
                    conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 3\r\n\r\nbad")
                    continue
                self.big += 1
                answer = (f"HTTP/1.1 200 OK\r\nContent-Length: {len(self.body)}\r\nETag: \"b\"\r\n"
                          f"Connection: close\r\n\r\n").encode() + self.body
                if self.big == 1:
                    conn.sendall(answer[:len(answer) // 3])
                    self.bad_gave_up.wait(30)
                    return
                try:
                    conn.sendall(answer)
                except OSError:  # (the client may have all it needs and gone)
                    pass
                return


def test_a_file_that_delivers_keeps_its_retries_when_another_gives_up(home, tmp_path, cli, quick_backoff):
    """A big file delivering from the host, and a file the host answers 500 to: that one gives
    up; the big file's connection then breaks, and the big file retries (it has bytes of this
    run) instead of giving up at its first failure."""
    body = os.urandom(3 << 20)
    server = BigAndBroken(body)
    try:
        listing = tmp_path / "urls.txt"
        listing.write_text(f"{server.base}/big.bin\n{server.base}/bad.bin\n")
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "--host-connections", "2", "--connections", "1",
                   "--retries", str(RETRIES), "-q")
    finally:
        server.close()
    assert proc.returncode == 3, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error: ")]
    assert len(errors) == 1 and "bad.bin" in errors[0], proc.stderr
    assert (out / "big.bin").read_bytes() == body
