"""What the previous issues left open (issue 21, item 6), each against real servers."""

from __future__ import annotations

import random

from tests.conftest import run_cli
from tests.origin import CloseAfter, OriginServer
from tests.test_faults import fault_env
from tests.test_faults_kill import Running

SIZE = 3 << 20


def test_two_sources_with_different_etags_are_not_stitched_without_a_hash(home, origin, tmp_path):
    """Same size, other bytes, other ETags: one source's file, whole, never a mix of both."""
    mine, theirs = random.Random(61).randbytes(SIZE), random.Random(62).randbytes(SIZE)
    origin.put("data.bin", mine)
    with OriginServer() as mirror:
        mirror.put("data.bin", theirs)
        origin.rate = mirror.rate = 2_000_000  # both still running when the other answers
        proc = run_cli("get", origin.url_for("data.bin"), "--mirror", mirror.url, "--also-origin",
                       "--connections", "6", "-o", str(tmp_path / "data.bin"),
                       env=fault_env(PREFETCH_MIN_SPLIT="65536"))
        assert proc.returncode == 0, proc.stderr
        got = (tmp_path / "data.bin").read_bytes()
        assert got in (mine, theirs), "stitched from two different files"
        assert "are not mixed" in proc.stderr, proc.stderr
        assert origin.data_requests("data.bin") and mirror.data_requests("data.bin")  # both were asked


class LateListener:
    """A loopback port that refuses connections until ``open()``, then forwards them to ``upstream``."""

    def __init__(self, upstream_port: int) -> None:
        import socket

        self.upstream = upstream_port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        self.port = self.sock.getsockname()[1]

    def open(self) -> None:
        import threading

        self.sock.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(2)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def test_a_source_dropped_as_unreachable_is_tried_again_later_in_a_long_run(home, origin, tmp_path, monkeypatch):
    for name, value in fault_env(PREFETCH_REVIVE_AFTER="0.5", PREFETCH_MIN_SPLIT="65536").items():
        monkeypatch.setenv(name, value)

    data = random.Random(63).randbytes(2 << 20)
    origin.put("big.bin", data)
    origin.rate = 200_000  # a long run: the origin is slow ...
    for _ in range(2):  # ... and its first connections break after a while (1.5 s): new requests follow
        origin.add_fault(CloseAfter(300_000, path="big.bin"))
    with OriginServer() as mirror:
        mirror.put("big.bin", data)
        late = LateListener(mirror.port)
        try:
            run = Running("get", origin.url_for("big.bin"), "--mirror", f"http://127.0.0.1:{late.port}/",
                          "--also-origin", "--connections", "2", "-o", str(tmp_path / "big.bin"))
            run.wait_for_line(f"dropped source http://127.0.0.1:{late.port}/big.bin: Connection refused")
            late.open()  # the mirror's route comes back once it was dropped
            code = run.proc.wait(120)
            stderr = "".join(run.seen)
        finally:
            late.close()
        assert code == 0, stderr
        assert (tmp_path / "big.bin").read_bytes() == data
        assert mirror.data_requests("big.bin"), stderr  # the dropped mirror was tried again
