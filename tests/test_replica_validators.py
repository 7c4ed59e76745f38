"""A pool of servers whose copies carry their own validators is not a file that keeps changing.

Behind a load balancer, each replica of a mirror may answer the same bytes with its own ETag
(Apache's default ETag holds the inode; nginx's holds the mtime, which differs where copies were
made at different times) and its own Last-Modified. prefetch asks for a file in many ranged
requests and met a new validator on every other one: it restarted from 0 each time and gave up,
"the remote file kept changing (4 restarts)", exit 4, where curl and wget (one stream) succeed.
Now a validator seen before from the same source marks it a pool of replicas: with the file's
hash known its validators are no longer compared (the hash judges the bytes, several connections
as usual); without one, the file comes in one stream from 0, from one replica, never mixed.

The server here is a real HTTP/1.1 server on 127.0.0.1 whose answers alternate between two
replicas' validators (and ``If-Range`` is honoured per replica, as each replica would).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import run_cli
from tests.test_faults import fault_env

DATA = os.urandom(3 << 20)
REPLICAS = [('"5f3a-1"', "Mon, 01 Jan 2024 00:00:00 GMT"), ('"5f3a-2"', "Tue, 02 Jan 2024 00:00:00 GMT")]


class _ReplicaPool:
    """Each request is answered by the next replica in turn: the same bytes, its own validators.
    ``versions``: the bytes per replica (default: the same DATA for both)."""

    def __init__(self, *, rate: int, versions: list[bytes] | None = None) -> None:
        self.rate = rate
        self.versions = versions or [DATA, DATA]
        self.turn = itertools.count()
        self.statuses: list[int] = []
        pool = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                n = next(pool.turn) % 2
                etag, modified = REPLICAS[n]
                data = pool.versions[n]
                start, end = 0, len(data) - 1
                asked = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
                if_range = self.headers.get("If-Range")
                ranged = asked is not None and (if_range is None or if_range in (etag, modified))
                status = 206 if ranged else 200
                pool.statuses.append(status)
                self.send_response(status)
                if ranged:
                    start = int(asked.group(1))
                    end = min(int(asked.group(2)), end) if asked.group(2) else end
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                for k, v in (("ETag", etag), ("Last-Modified", modified), ("Accept-Ranges", "bytes"),
                             ("Content-Type", "application/octet-stream"), ("Content-Length", str(end - start + 1))):
                    self.send_header(k, v)
                self.end_headers()
                pos = start
                try:
                    while pos <= end:
                        k = min(32 << 10, end - pos + 1)
                        self.wfile.write(data[pos:pos + k])
                        pos += k
                        time.sleep(k / pool.rate)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/model.bin"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _ReplicaPool:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_without_a_hash_a_replica_pool_gives_the_file_in_one_stream(home, tmp_path):
    out = tmp_path / "model.bin"
    with _ReplicaPool(rate=2 << 20) as pool:
        done = run_cli("get", pool.url, "-o", str(out), env=fault_env(PREFETCH_MIN_SPLIT="65536"), timeout=120)
    assert done.returncode == 0, done.stderr  # (before: exit 4, "the remote file kept changing")
    assert out.read_bytes() == DATA
    assert "kept changing" not in done.stderr
    # (Whether the pool is named depends on which replica answers which request: the second
    # change marks it, and the ramp may finish the file in one open-ended answer before.)


def test_with_the_hash_a_replica_pool_keeps_its_connections(home, tmp_path):
    out = tmp_path / "model.bin"
    sha = hashlib.sha256(DATA).hexdigest()
    with _ReplicaPool(rate=1 << 20) as pool:
        done = run_cli("get", pool.url, "-o", str(out), "--sha256", sha, "--connections", "3",
                       env=fault_env(PREFETCH_MIN_SPLIT="65536"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == DATA
    assert pool.statuses.count(206) >= 3  # ranges from both replicas, the hash judging the whole


@pytest.mark.parametrize("hashed", [False, True])
def test_replicas_that_hold_different_bytes_never_give_a_mixed_file(home, tmp_path, hashed):
    """Two replicas of one size but different bytes (a rollout half done): the file placed is one
    replica's, whole; with the hash of one of them, that one or a clean failure."""
    other = bytearray(DATA)
    other[len(other) // 2] ^= 0xFF
    out = tmp_path / "model.bin"
    extra = ["--sha256", hashlib.sha256(DATA).hexdigest()] if hashed else []
    with _ReplicaPool(rate=2 << 20, versions=[DATA, bytes(other)]) as pool:
        done = run_cli("get", pool.url, "-o", str(out), *extra, env=fault_env(PREFETCH_MIN_SPLIT="65536"),
                       timeout=120)
    if done.returncode == 0:
        assert out.read_bytes() in ((DATA,) if hashed else (DATA, bytes(other)))
    else:
        assert done.returncode in (3, 4), done.stderr
        assert not out.exists()
