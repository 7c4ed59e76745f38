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
from http.server import BaseHTTPRequestHandler

import pytest

from tests.conftest import run_cli
from tests.paced_server import PacedServer, send_paced
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
                if_range = self.headers.get("If-Range")
                ranged = if_range is None or if_range in (etag, modified)  # (each replica judges its own)
                pool.statuses.append(send_paced(self, data, pool.rate, {
                    "ETag": etag, "Last-Modified": modified, "Accept-Ranges": "bytes",
                    "Content-Type": "application/octet-stream"}, ranged=ranged))

        self.paced = PacedServer(Handler)
        self.url = f"{self.paced.base}/model.bin"

    def __enter__(self) -> _ReplicaPool:
        self.paced.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.paced.__exit__(*exc)


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
