"""With an expected hash, the file arrives in order and the hash follows it as it grows.

A hash needs the file's bytes in order, from byte 0. When eight connections each fetched
an eighth of the file, the contiguous prefix grew at one connection's rate and ~90% of
the file was still to hash after its last byte (200 MiB on loopback: `--sha256` took
1.17x the time of the same download without it). Now each connection's next request is
the next window of the file (``Schedule.take(low_first=True)``), and the workers hash
the prefix as it grows (``PrefixHasher.advance``); ``TransferResult.hash_tail`` says how
much was left to hash after the last byte.

These drive the real :class:`Schedule` and :class:`PrefixHasher`, and a real transfer
from nginx.
"""

from __future__ import annotations

import hashlib
import os
import threading

import pytest

from prefetch.engine.options import TransferOptions
from prefetch.engine.ranges import RangeSet
from prefetch.engine.schedule import Schedule
from prefetch.engine.stream import PrefixHasher
from prefetch.engine.transfer import download_to_part
from tests.latency_proxy import LatencyProxy
from tests.nginx import NginxServer, nginx_binary

MIB = 1 << 20


def test_with_a_hash_a_new_connection_takes_the_bytes_right_after_the_first_window():
    schedule = Schedule(min_split=512 << 10)
    schedule.plan(64 * MIB, RangeSet())
    first = schedule.take(0, splittable=True, smallest=512 << 10, low_first=True)
    first.asked_to, first.asked_from = 2 * MIB, 0  # its request: bytes 0 to 2 MiB
    second = schedule.take(1, splittable=True, smallest=512 << 10, low_first=True)
    assert (second.pos, second.end) == (2 * MIB, 64 * MIB)
    assert first.end == 2 * MIB
    second.asked_to, second.asked_from = 5 * MIB, 2 * MIB
    third = schedule.take(2, splittable=True, smallest=512 << 10, low_first=True)
    assert third.pos == 5 * MIB  # the next window of the file, not the middle of what is left


def test_without_a_hash_a_new_connection_splits_the_largest_segment_in_half():
    schedule = Schedule(min_split=512 << 10)
    schedule.plan(64 * MIB, RangeSet())
    first = schedule.take(0, splittable=True, smallest=512 << 10, low_first=False)
    first.asked_to = 2 * MIB
    second = schedule.take(1, splittable=True, smallest=512 << 10, low_first=False)
    assert second.pos == 32 * MIB


def test_with_a_hash_pending_bytes_are_taken_lowest_first():
    schedule = Schedule(min_split=512 << 10)
    schedule.plan(64 * MIB, RangeSet([(8 * MIB, 10 * MIB), (12 * MIB, 13 * MIB)]))  # gaps: 0-8, 10-12, 13-64
    assert schedule.take(0, splittable=True, smallest=512 << 10, low_first=True).pos == 0
    assert schedule.take(1, splittable=True, smallest=512 << 10, low_first=True).pos == 10 * MIB
    assert schedule.take(2, splittable=False, smallest=512 << 10, low_first=False).pos == 13 * MIB


def test_a_worker_hashes_a_slice_of_the_prefix_and_never_waits_for_another(tmp_path):
    data = os.urandom(3 * PrefixHasher.SLICE + 12345)
    part = tmp_path / "f.part"
    part.write_bytes(data)
    lock = threading.Lock()
    done = RangeSet([(0, len(data))])
    hasher = PrefixHasher("sha256", part)
    with hasher.lock:  # another thread is hashing: the worker goes back to its socket
        hasher.advance(done.prefix_end, lock)
    assert hasher.hashed == 0
    hasher.advance(done.prefix_end, lock)
    assert hasher.hashed == PrefixHasher.SLICE  # one slice per turn
    hasher.catch_up(done.prefix_end, lock)
    assert hasher.hashed == len(data)
    assert hasher.finish(len(data)) == hashlib.sha256(data).hexdigest()


def test_a_hashed_download_over_many_connections_is_hashed_as_it_arrives(tmp_path):
    assert nginx_binary(), "nginx is required: tests/run.sh installs it"
    size = 48 * MIB
    root = tmp_path / "root"
    root.mkdir()
    data = os.urandom(size)
    (root / "f.bin").write_bytes(data)
    part = tmp_path / "f.bin.part"
    # Each connection paced at exactly 4 MiB/s by the proxy (no per-second bursts, unlike
    # nginx's limit_rate): ~3 s over 4 connections, a pace any machine hashes faster than.
    with NginxServer(root) as nginx:
        proxy = LatencyProxy(nginx.port, rtt=0.002, pace=4 * MIB).start()
        try:
            result = download_to_part(urls=[proxy.url_for("f.bin")], part=part, state_file=tmp_path / "f.state",
                                      algorithm="sha256", options=TransferOptions(connections=4))
        finally:
            proxy.stop()
    assert result.digest == hashlib.sha256(data).hexdigest()
    assert result.connections == 4
    # Four connections on four quarters leave about half the file to hash after the last
    # byte (the prefix grows at one connection's rate); in file order, what is left is at
    # most the last windows and a slice.
    assert result.hash_tail <= size // 4, result.hash_tail


@pytest.mark.parametrize("algorithm", [None, "sha256"])
def test_a_small_file_is_hashed_by_its_worker_as_it_arrives(tmp_path, algorithm):
    """A file under the hash thread's threshold (4 MiB): its worker hashes each read but the
    last (which the transfer's own thread hashes, while the connection goes back to the pool)."""
    assert nginx_binary(), "nginx is required: tests/run.sh installs it"
    root = tmp_path / "root"
    root.mkdir()
    size = 3 * MIB
    data = os.urandom(size)
    (root / "f.bin").write_bytes(data)
    with NginxServer(root) as nginx:
        result = download_to_part(urls=[nginx.url_for("f.bin")], part=tmp_path / "f.bin.part",
                                  state_file=tmp_path / "f.state", algorithm=algorithm,
                                  options=TransferOptions(connections=1))
    assert result.digest == (hashlib.sha256(data).hexdigest() if algorithm else None)
    if algorithm:
        assert 0 < result.hash_tail <= 1 << 20, result.hash_tail  # the last read at most (a splice: 1 MiB)
    else:
        assert result.hash_tail == 0


def test_the_worker_that_grows_the_prefix_leaves_the_hash_to_the_others(tmp_path):
    """It holds the lowest window, which the prefix waits for; a worker behind the front (or
    the only worker) hashes. Drives the real transfer's ``record`` on a real ``.part``."""
    from prefetch.engine.schedule import Segment
    from prefetch.engine.transfer import _Transfer
    from prefetch.model.events import ignore_event

    size = 24 * MIB
    data = os.urandom(size)
    part = tmp_path / "f.part"
    part.write_bytes(data)
    t = _Transfer(urls=["http://127.0.0.1:9/f"], part=part, state_file=tmp_path / "f.state", algorithm="sha256",
                  options=TransferOptions(), on_event=ignore_event, stop=threading.Event(), client_factory=None,
                  name="f")
    t.size = size
    src = t.sources.all[0]
    t.active_workers = 2
    assert t.record(Segment(0, 0, 12 * MIB), src, 0, 12 * MIB, t.generation)  # the front grows: no hashing here
    assert t.hash.hashed == 0
    assert t.record(Segment(16 * MIB, 16 * MIB, size), src, 16 * MIB, MIB, t.generation)  # behind it: a slice
    assert t.hash.hashed == PrefixHasher.SLICE
    t.active_workers = 1
    assert t.record(Segment(12 * MIB, 12 * MIB, 16 * MIB), src, 12 * MIB, MIB, t.generation)  # alone: it hashes
    assert t.hash.hashed == 13 * MIB  # (the prefix: 0-13 MiB)
    assert t.hash.finish(size) == hashlib.sha256(data).hexdigest()
