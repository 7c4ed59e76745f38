"""``torch_dataset`` under a real torch ``DataLoader`` with worker processes, against nginx behind a
200 ms route (tests/nginx.py, tests/latency_proxy.py): what a training loop that leaves early
does to the workers' downloads."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

import prefetch
from prefetch.cache.layout import part_path, state_path
from tests.latency_proxy import LatencyProxy
from tests.nginx import NginxServer
from tests.test_jobs import poll
from tests.test_stream import on_disk

KiB = 1 << 10


@pytest.fixture
def unix_sockets():
    """torch's DataLoader workers hand items over on Unix sockets: allow those (still no network beyond loopback)."""
    from pytest_socket import socket_allow_hosts

    socket_allow_hosts(["127.0.0.1", "::1", "localhost"], allow_unix_socket=True)


@pytest.fixture
def route(tmp_path):
    """nginx (128 KiB/s per connection) behind a 200 ms route; ``route.put(name, data)`` -> URL#sha256."""
    root = tmp_path / "nginx-root"
    root.mkdir()
    with NginxServer(root, limit_rate="128k") as server, LatencyProxy(server.port, rtt=0.2) as proxy:
        def put(name: str, data: bytes) -> str:
            (root / name).write_bytes(data)
            return proxy.url_for(name) + "#sha256=" + hashlib.sha256(data).hexdigest()

        proxy.put, proxy.nginx = put, server
        yield proxy


def gets(route, name: str) -> list[str]:
    """The Range headers of the GETs nginx answered for ``name`` ("" for none)."""
    return [asked for _body, _status, _conn, asked, line in route.nginx.served() if line.split()[1] == "/" + name]


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_leaving_the_loop_stops_workers_waiting_on_a_download_without_torch_killing_them(
        route, home, tmp_path, unix_sockets, start):
    """A worker blocked in ``next()`` while its next shard downloads used to hear nothing of the
    loader's shutdown: torch waited 5 s for it, then killed it with SIGTERM mid-download."""
    from torch.utils.data import DataLoader

    names = [f"part-{i}.npy" for i in range(4)]
    blobs = {n: os.urandom(16 * KiB if i < 2 else 1 << 20) for i, n in enumerate(names)}  # 2, 3: ~8 s each
    urls = [route.put(n, blobs[n]) for n in names]
    out = tmp_path / "out"
    dataset = prefetch.torch_dataset(urls, output_dir=str(out), connections=1, max_ahead=1, progress=False)
    loader = DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context=start)
    it = iter(loader)
    assert next(it) == str(out / names[0])
    killed = []
    for worker in it._workers:  # what torch does to a worker that did not leave within its 5 s join
        worker.terminate = lambda w=worker, terminate=worker.terminate: (killed.append(w.pid), terminate())
    poll(lambda: all(state_path(out / n).exists() for n in names[2:]), what="both big shards in flight", timeout=60)
    del it  # a `break` out of the loop drops the iterator: torch shuts its workers down
    assert killed == []  # each worker left by itself, its downloads stopped, not killed mid-write
    for name in names[2:]:  # stopped resumable, nothing half-placed
        assert not (out / name).exists() and part_path(out / name).exists() and state_path(out / name).exists()
    kept = on_disk(out, names)
    time.sleep(1.5)
    assert on_disk(out, names) == kept  # nothing downloads any more
    again = list(DataLoader(dataset, batch_size=None, num_workers=2, multiprocessing_context=start))
    assert again == [str(out / n) for n in names]
    assert all((out / n).read_bytes() == blobs[n] for n in names)
    assert all(any(asked.startswith("bytes=") and not asked.startswith("bytes=0-") for asked in gets(route, n))
               for n in names[2:])  # the second epoch resumed them


CHILD = """
import json, sys, time
import prefetch
from torch.utils.data import DataLoader

urls, out = json.loads(sys.argv[1]), sys.argv[2]
dataset = prefetch.torch_dataset(urls, output_dir=out, connections=1, max_ahead=1, progress=False)
it = iter(DataLoader(dataset, batch_size=None, num_workers=1))
print(json.dumps([next(it), [w.pid for w in it._workers]]), flush=True)
time.sleep(600)
"""


def test_a_worker_whose_training_process_died_stops_its_download(route, home, tmp_path):
    """The training process killed (SIGKILL, an out-of-memory kill, a kernel restart that reaches
    only the kernel): its worker used to go on downloading until its current file was complete."""
    import json
    import signal
    import subprocess
    import sys

    names = ["part-0.npy", "part-1.npy"]
    blobs = {names[0]: os.urandom(16 * KiB), names[1]: os.urandom(2 << 20)}  # part-1: ~16 s
    urls = [route.put(n, blobs[n]) for n in names]
    out = tmp_path / "out"
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(urls), str(out)], stdout=subprocess.PIPE,
                             text=True)
    try:
        first, (worker,) = json.loads(child.stdout.readline())
        assert first == str(out / names[0])
        poll(lambda: state_path(out / names[1]).exists(), what="part-1 in flight")
    finally:
        child.kill()
        child.wait()
    poll(lambda: not os.path.exists(f"/proc/{worker}") or open(f"/proc/{worker}/stat").read().split()[2] == "Z",
         what="the orphaned worker to leave", timeout=60)
    assert not (out / names[1]).exists()  # it stopped, it did not finish the file first
    assert part_path(out / names[1]).exists() and state_path(out / names[1]).exists()  # resumable
