"""A pool of servers whose copies of one URL differ (one copy updated, the other not yet) and
carry weak ETags of their own, fetched without an expected hash over several connections: the
file placed is one copy, never pieces of both (engine/sources.py ``replicas``).

Before, a second copy's answer in the generation that a first change restarted marked the
source as a replica pool (its validators then never compared) while its "one stream from 0"
was dropped with that generation: the next generation's ranges from both copies were all
accepted, and a mix of the two was placed, exit 0, unverified."""

from __future__ import annotations

import os
import re
import threading
from http.server import BaseHTTPRequestHandler

from tests.conftest import run_cli
from tests.paced_server import PacedServer

SIZE = 4 << 20


def _pool(copies: list[bytes]):
    count = [0]
    lock = threading.Lock()

    class Pool(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            with lock:
                count[0] += 1
                n = count[0]
            which = 0 if n == 1 or (n > 4 and n % 2) else 1  # a, b, b, b, then by turns
            data = copies[which]
            start, end = 0, SIZE - 1
            asked = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
            if asked:
                start = int(asked.group(1))
                end = min(int(asked.group(2)), end) if asked.group(2) else end
            self.send_response(206 if asked else 200)
            self.send_header("ETag", f'W/"copy{which}"')
            self.send_header("Accept-Ranges", "bytes")
            if asked:
                self.send_header("Content-Range", f"bytes {start}-{end}/{SIZE}")
            self.send_header("Content-Length", str(end - start + 1))
            self.end_headers()
            try:
                self.wfile.write(data[start:end + 1])
            except OSError:
                pass

    return Pool


def test_pieces_of_two_copies_are_never_placed_together(home, tmp_path):
    """Three downloads (the mix needed a second copy's answer before the restart took hold,
    which 5 of 6 single runs on the base met): each places one copy."""
    for attempt in range(3):
        copies = [os.urandom(SIZE), os.urandom(SIZE)]
        out = tmp_path / f"f{attempt}.bin"
        with PacedServer(_pool(copies)) as server:
            done = run_cli("get", f"{server.base}/f.bin", "-o", str(out), "--connections", "4",
                           env=dict(os.environ, PREFETCH_MIN_SPLIT=str(256 << 10)), timeout=120)
        assert done.returncode == 0, done.stderr
        assert out.read_bytes() in copies, f"a mix of the two copies was placed (download {attempt + 1})"
