"""Two small files in flight on a near host while their data is flushed (#19).

On loopback one file in flight kept the process at ~0.75 CPU seconds a second (its
``fdatasync`` waits on the disk), which ``Hosts.files_now`` rounds down to one file; with
``sync_data`` (``PREFETCH_SYNC``, on by default) the run keeps at least two in flight while
the files leave the interpreter idle, so one file's flush overlaps the other's request.
Files that keep it busy (large ones on a fast link) and files not flushed stay at one. Each file still flushes its ``.part`` before the
rename to its final name, on its own thread under its own lock (tests/test_many_overhead.py).
"""

from __future__ import annotations

import os
import threading

import pytest

from tests.nginx import NginxServer


def test_a_near_host_keeps_two_files_in_flight_when_their_data_is_flushed():
    from prefetch.engine.hosts import Hosts
    from prefetch.engine.many import FLUSHING_FILES, near_limit

    hosts = Hosts(long_route=0.04)
    near = hosts.host_for("http://127.0.0.1:1/a")
    near.route.add(0.0003)
    one_file = (0.75, 1.0)  # one file in flight keeps the process at 0.75: files_now says one
    assert hosts.files_now(32, one_file) == 1
    assert near_limit(hosts, 32, flushing=True)(one_file) == FLUSHING_FILES == 2
    assert near_limit(hosts, 32, flushing=False)(one_file) == 1, "without a flush a second file only adds hand-offs"
    assert near_limit(hosts, 1, flushing=True)(one_file) == 1, "never more than the workers"
    assert near_limit(hosts, 32, flushing=True)((0.95, 1.0)) == 1, "a file that keeps the interpreter busy: one"
    assert near_limit(hosts, 32, flushing=True)((1.0, 2.0)) == 2, "two that leave it idle half the time: two"
    assert near_limit(hosts, 32, flushing=True)((0.05, 1.0)) == hosts.files_now(32, (0.05, 1.0)), \
        "more when the files wait longer"
    far = hosts.host_for("http://example.org/b")
    for _ in range(5):
        far.route.add(0.2)
    assert near_limit(hosts, 32, flushing=True)(one_file) == 32, "a long route keeps every file in flight"


@pytest.mark.parametrize("sync, cpu, most", [("1", 0.5, 2), ("0", 0.5, 1), ("1", 0.95, 1)])
def test_a_list_of_small_files_has_two_in_flight_only_while_they_are_flushed(home, tmp_path, monkeypatch, sync,
                                                                             cpu, most):
    import prefetch.flow.file_list as files
    from prefetch.engine.hosts import Hosts
    from prefetch.engine.many import Busy
    from prefetch.flow.planning import run_request
    from prefetch.flow.request import GetRequest

    monkeypatch.setenv("PREFETCH_SYNC", sync)
    # The usual path's files in flight (the bulk lane, which now takes every file after the first
    # of a near host, has its own shared flush: flow/file_batch.py).
    monkeypatch.setenv("PREFETCH_BULK", "0")
    monkeypatch.setattr(Hosts, "files_now", lambda self, workers, busy=None: 1)  # "one file is enough"
    monkeypatch.setattr(Busy, "now", lambda self: (cpu, 1.0))  # one file in flight kept it at `cpu` CPU s/s
    root = tmp_path / "www"
    root.mkdir()
    names = [f"s{i:03d}.bin" for i in range(40)]
    for name in names:
        (root / name).write_bytes(os.urandom(16 << 10))
    real_fetch = files.fetch_file
    running, peak, lock = [0], [0], threading.Lock()

    def fetch_file(*args, **kwargs):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            return real_fetch(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(files, "fetch_file", fetch_file)
    with NginxServer(root) as nginx:
        request = GetRequest(names=[], urls=[{"url": nginx.url_for(n)} for n in names],
                             output_dir=str(tmp_path / "out"))
        results = run_request(request)
    assert [r.status for r in results] == ["downloaded"] * 40
    for name in names:
        assert (tmp_path / "out" / name).read_bytes() == (root / name).read_bytes()
    assert peak[0] == most, peak
