"""A server that refuses every request (429, 503) of a file whose probe waits: the connections
opened ahead of the probe's answer (engine/preconnect.py) held the host's slots, the refusal
lowered the host's cap to them, and the probe's retry waited in ``Host.admit`` for good while
they waited for its answer: ``prefetch get URL`` never ended. Now they go back when the host
refuses, and the file fails after its retries as any refused file does (exit 3)."""

from __future__ import annotations

import pytest

from tests.keepalive import KeepAliveServer


@pytest.mark.parametrize("status", [b"429 Too Many Requests", b"503 Service Unavailable"])
def test_a_file_refused_every_time_ends_after_its_retries(home, tmp_path, cli, status):
    answer = b"HTTP/1.1 %s\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n" % status
    server = KeepAliveServer([answer])
    try:
        proc = cli("get", f"{server.base}/x.bin", "-P", str(tmp_path / "out"), "--plain", timeout=30)
    finally:
        server.close()
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "gave up after" in proc.stderr and status[:3].decode() in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "out" / "x.bin").exists()
