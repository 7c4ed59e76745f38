"""A server that says ``Connection: close`` on each answer (HTTP/1.1, no keep-alive): the bulk
lane would open a connection a file or two, two at a time on its one thread, where the usual
path runs many files side by side (400 files from a 10 ms server: 1.6 s against 0.9-1.15 s).
A connection closed before ``DEPTH`` answers ends the lane for the host at once."""

from __future__ import annotations

import hashlib
import os
import socket

from tests.bulk_origin import BulkOrigin

COUNT = 120


class ClosingOrigin(BulkOrigin):
    """Each answer says ``Connection: close`` and the connection closes after it."""

    def _answer(self, conn: socket.socket, name: str, ranged: bool) -> bool:
        data = self.files[name]
        with self._lock:
            self.asked[name] += 1
        head = [b"HTTP/1.1 206 Partial Content", b"Content-Type: application/octet-stream",
                b"Content-Length: %d" % len(data), b'ETag: "v1"', b"Connection: close",
                b"Content-Range: bytes 0-%d/%d" % (len(data) - 1, len(data))]
        conn.sendall(b"\r\n".join(head) + b"\r\n\r\n" + data)
        conn.shutdown(socket.SHUT_WR)
        return False


def test_a_server_that_closes_after_each_answer_ends_the_lane_at_once(home, tmp_path, cli):
    """Every file arrives byte-exact, exit 0, one request each but those the lane had sent ahead
    on a closed connection; the lane asks for a few files at most (without the change: ~85)."""
    files = {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * 512 for i in range(COUNT)}
    with ClosingOrigin(files) as origin:
        listing = tmp_path / "list.txt"
        listing.write_text("".join(f"{origin.url_for(name)}\n" for name in files))
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "-q", env={**os.environ, "PREFETCH_BULK": "1"})
        assert proc.returncode == 0, proc.stderr
        lane = origin.lane()
    for name, data in files.items():
        assert (out / name).read_bytes() == data, name
    assert 1 <= lane <= 8, f"the lane asked for {lane} files of a server that closes each connection"
