"""The bulk lane's hand-out of files to chunks (``flow/file_list._Lane``), with a real ``Hosts``:
how the lane starts on a host whose first answer is not in yet, and which waiting thread takes
the next chunk when one ends."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest

from prefetch.engine.hosts import Hosts
from prefetch.flow.file_list import _Lane
from prefetch.flow.options import FetchOptions


@pytest.fixture
def lane(monkeypatch):
    monkeypatch.delenv("PREFETCH_BULK", raising=False)
    options = FetchOptions()
    options = replace(options, transfer=replace(options.transfer, hosts=Hosts(budget=4)))
    lane = _Lane([None] * 600, options)
    lane.urls = {i: f"http://127.0.0.1:9/f{i}" for i in range(600)}  # (every file eligible, one host)
    return lane


def _in_thread(lane, index, stop):
    got = {}
    thread = threading.Thread(target=lambda: got.setdefault("chunk", lane.chunk_from(index, stop)), daemon=True)
    thread.start()
    return thread, got


def _until_waiting(lane, host, threads, *indexes):
    """Until the threads of ``indexes`` wait for the lane (or one of ``threads`` has returned)."""
    while all(t.is_alive() for t in threads):
        with lane.lock:
            if set(indexes) <= lane.waiting.get(host, set()):
                return
        threading.Event().wait(0.001)


def test_the_files_after_a_hosts_first_wait_for_its_first_answer_and_take_the_lane(lane, monkeypatch):
    """The first file of a host nothing has answered yet goes the usual way (the scout); the next
    one waits for the scout's answer instead of going the usual way too, and takes a chunk as
    soon as that answer shows the host near (without the wait, every file started before the
    first answer went the usual way: ~20-30 of a 2,000-file list on loopback)."""
    stop = threading.Event()
    host = lane.options.transfer.hosts.host_for(lane.urls[0])
    monkeypatch.setattr(_Lane, "SCOUT_WAIT", 60.0)  # (a loaded machine's thread start is no answer late)
    assert lane.chunk_from(0, stop) is None, "the scout goes the usual way"
    thread, got = _in_thread(lane, 1, stop)
    _until_waiting(lane, host, [thread], 1)
    host.route.add(0.001)  # the scout's answer, in 1 ms: a near host
    thread.join(10)
    got_host, chunk = got["chunk"]
    assert got_host is host and [i for i, _, _ in chunk] == list(range(1, 1 + _Lane.CHUNK))


def test_a_far_or_silent_hosts_files_go_the_usual_way(lane, monkeypatch):
    """A first answer from a long route: the next file goes the usual way at once; no answer at
    all: after ``SCOUT_WAIT``."""
    stop = threading.Event()
    host = lane.options.transfer.hosts.host_for(lane.urls[0])
    monkeypatch.setattr(_Lane, "SCOUT_WAIT", 0.05)
    assert lane.chunk_from(0, stop) is None
    thread, got = _in_thread(lane, 1, stop)
    thread.join(10)
    assert not thread.is_alive() and got["chunk"] is None, "no answer within SCOUT_WAIT: the usual way"
    host.route.add(0.5)  # a long route's answer
    assert lane.chunk_from(2, stop) is None


def test_when_a_chunk_ends_the_waiting_thread_with_the_earliest_file_takes_the_next(lane):
    """Threads wait for the lane while a chunk of their host runs. When it ends, the one holding
    the earliest file builds the next chunk from there, which takes the later waiting files too
    (they return at once, nothing to do). Before, the first thread to wait took the chunk from its
    own file and the files before it were left to a chunk of their own, after a wait of up to
    0.2 s (a run's last files waited so: ~0.1-0.2 s of a 2,000-file list)."""
    stop = threading.Event()
    host = lane.options.transfer.hosts.host_for(lane.urls[0])
    host.route.add(0.001)
    got_host, first = lane.chunk_from(0, stop)
    assert [i for i, _, _ in first][-1] == _Lane.CHUNK - 1
    later, got_later = _in_thread(lane, 300, stop)  # (waits first)
    _until_waiting(lane, host, [later], 300)
    earlier, got_earlier = _in_thread(lane, 290, stop)
    _until_waiting(lane, host, [later, earlier], 300, 290)
    lane.ended(host)
    earlier.join(10)
    later.join(10)
    assert not earlier.is_alive() and not later.is_alive(), "a thread still waits for the lane"
    got_host, chunk = got_earlier["chunk"]
    assert [i for i, _, _ in chunk] == list(range(290, 290 + _Lane.CHUNK))
    assert got_later["chunk"] == (), "file 300 is in that chunk"


def test_a_slow_near_servers_files_handed_back_by_the_lane_run_side_by_side(home, tmp_path, cli):
    """nginx sends each answer at 8 KiB/s (a near host, a slow server): the lane takes the files
    after the first, finds itself waiting on the wire and hands them back. They then run the
    usual way on the scheduler's threads, several at once as the usual path runs any list, not
    one after another on the chunk's own thread (18 s instead of 4 for this list, before)."""
    from tests.nginx import NginxServer
    from tests.test_many import _max_overlap

    root = tmp_path / "www"
    root.mkdir()
    files = {f"f{i:04d}.bin": bytes([i]) * (12 << 10) for i in range(30)}
    for name, data in files.items():
        (root / name).write_bytes(data)
    with NginxServer(root, limit_rate="8k") as server:
        listing = tmp_path / "urls.txt"
        listing.write_text("".join(f"{server.url_for(name)}\n" for name in files))
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "-q")
        assert proc.returncode == 0, proc.stderr
        for name, data in files.items():
            assert (out / name).read_bytes() == data, name
        log = server.requests()
    after_first = [(r[2], r[3]) for r in log if "/f0000.bin" not in r[6]]
    # (the lane's own requests: at most 2 at once, its connections; a serial hand-back adds 1)
    assert _max_overlap(after_first) >= 4, "the handed-back files ran one at a time"


def test_the_next_chunk_goes_on_the_wire_while_the_last_one_is_flushed(home, tmp_path, monkeypatch):
    """A chunk done with the host's connections lets the host's next chunk start: its looks and
    requests overlap this one's flush (the disk's time) and renames. The first chunk's flush
    here waits until a second chunk is on the wire (it would wait in vain, 10 s, if the lane
    were held until the first was placed)."""
    import prefetch.flow.file_batch as file_batch
    from prefetch.engine import bulk
    from prefetch.flow.planning import run_request
    from prefetch.flow.request import GetRequest
    from tests.nginx import NginxServer

    monkeypatch.setenv("PREFETCH_SYNC", "1")
    monkeypatch.setattr(_Lane, "CHUNK", 16)
    root = tmp_path / "www"
    root.mkdir()
    names = [f"s{i:03d}.bin" for i in range(64)]
    for name in names:
        (root / name).write_bytes(name.encode() * 1000)
    on_wire, flushed_first = threading.Event(), []
    real_pipelined, real_syncfs = bulk.fetch_pipelined, file_batch._syncfs
    chunks = []

    def fetch_pipelined(host, jobs, **kwargs):
        chunks.append(len(jobs))
        if len(chunks) > 1:
            on_wire.set()
        return real_pipelined(host, jobs, **kwargs)

    def syncfs(folder, parts):
        if not flushed_first:
            flushed_first.append(on_wire.wait(10))
        return real_syncfs(folder, parts)

    monkeypatch.setattr(bulk, "fetch_pipelined", fetch_pipelined)
    monkeypatch.setattr(file_batch, "_syncfs", syncfs)
    with NginxServer(root) as nginx:
        request = GetRequest(names=[], urls=[{"url": nginx.url_for(n)} for n in names],
                             output_dir=str(tmp_path / "out"))
        results = run_request(request)
    assert [r.status for r in results] == ["downloaded"] * len(names)
    for name in names:
        assert (tmp_path / "out" / name).read_bytes() == (root / name).read_bytes()
    assert len(chunks) >= 2 and flushed_first == [True], (chunks, flushed_first)


def test_the_writer_thread_is_handed_bodies_in_batches(tmp_path, monkeypatch):
    """The lane's thread hands the writer thread its bodies ``_Writer.BATCH`` at a time: one
    wake-up of the writer (and one hand-off of the interpreter lock) per batch, not per file
    (20 of 30 alternating rounds faster on loop2000, CPU lower in each set); every body is
    still written to its own ``.part``, and the last, short batch at ``finish``."""
    import queue
    from types import SimpleNamespace

    from prefetch.flow.file_batch import _Writer

    puts = []

    class Counted(queue.Queue):
        def put(self, item, block=True, timeout=None):
            puts.append(item)
            super().put(item, block, timeout)

    monkeypatch.setattr(queue, "SimpleQueue", Counted)
    writer = _Writer(sync=False)
    bodies = {i: bytes([i]) * 100 for i in range(40)}
    for i, body in bodies.items():
        plan = SimpleNamespace(final=tmp_path / f"f{i}", spec=SimpleNamespace(size=100, expected=None))
        writer.put(i, plan, SimpleNamespace(body=body), None)
    done = writer.finish()
    assert sorted(done) == sorted(bodies) and all(done.values())
    for i, body in bodies.items():
        assert (tmp_path / f"f{i}.part").read_bytes() == body
    assert len(puts) <= 5, f"{len(puts)} hand-offs for {len(bodies)} bodies"  # (16 + 16 + 8, the end)
