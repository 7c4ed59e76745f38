"""The API in a forked child (a torch DataLoader worker, a ``multiprocessing`` "fork" pool)
while the parent downloads: the child must not act on the parent's connections.

A child of ``fork`` holds the parent's sockets (the same open connections) and a copy of
its module state. Each request's head is awaited under a deadline booked on the process's
one watchdog thread (``net/deadlines.py``); the parent cancels its booking when the head
arrives, but the child's copy of the booking stays: once the child runs a download of its
own (its watchdog thread starts), it ran the parent's expired booking, which shuts the
socket down, the parent's socket, cutting the parent's download mid-body.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.origin_faults import Delay
from tests.test_hf import hf_env, hub  # noqa: F401 (fixtures)

MiB = 1 << 20

PARENT = r"""
import multiprocessing, os, sys, threading, time
import prefetch

big_url, big_out, small_url, small_out, timeout = sys.argv[1:6]
timeout = float(timeout)
results = []

def download():
    results.append(prefetch.ensure(big_url, output=big_out, connections=1, timeout=timeout, progress=False))

def child():  # a DataLoader worker's first file: its own small download, then it keeps working
    try:
        prefetch.ensure(small_url, output=small_out, progress=False)
    except BaseException as exc:
        print("child failed", repr(exc), file=sys.stderr, flush=True)
    time.sleep(3 * timeout)

thread = threading.Thread(target=download)
thread.start()
sys.stdin.readline()  # the test's word: the origin holds the request (a Delay): its head's deadline is booked
worker = multiprocessing.get_context("fork").Process(target=child, daemon=True)
worker.start()
thread.join()
print("parent", results[0][0].status, flush=True)
worker.terminate()
worker.join()
"""


def test_a_forked_child_downloading_does_not_cut_the_parents_connection(origin, home, tmp_path):
    big = os.urandom(8 * MiB)
    origin.put("big.bin", big)
    origin.put("small.bin", os.urandom(1000))
    origin.add_fault(Delay(path="/big.bin", seconds=1.5))
    origin.rate = 1 * MiB  # ~8 s of body (each answer: the child's is not held up): the parent's head deadline (3 s) passes mid-body
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    big_out, small_out = tmp_path / "big.bin", tmp_path / "small.bin"
    parent = subprocess.Popen([sys.executable, str(script), origin.url_for("big.bin"), str(big_out),
                               origin.url_for("small.bin"), str(small_out), "3"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        # The fork comes once the origin holds the parent's request, not after a fixed sleep: on a
        # loaded machine the parent's thread was still importing prefetch's modules 0.3 s in, and a
        # child forked then waits forever for the import lock that thread held (CPython's per-module
        # import locks are not reset in a forked child): its own download never ran.
        deadline = time.monotonic() + 60
        while origin.pending_faults and parent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        parent.stdin.write("fork\n")
        parent.stdin.flush()
        out, err = parent.communicate(timeout=120)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.communicate()
    assert parent.returncode == 0, err[-3000:]
    assert "parent downloaded" in out
    assert big_out.read_bytes() == big
    assert small_out.stat().st_size == 1000
    requests = origin.data_requests("big.bin")
    assert len(requests) == 1, (
        f"the parent's download was cut and asked again: {[(r.status, r.body_bytes_sent) for r in requests]}")


HOLDER = r"""
import multiprocessing, sys, threading, time
import prefetch

big_url, big_out = sys.argv[1:3]
results = []

def download():
    results.append(prefetch.ensure(big_url, output=big_out, connections=2, progress=False))

def child():  # a DataLoader worker: lives for the whole epoch
    time.sleep(600)

thread = threading.Thread(target=download)
thread.start()
time.sleep(1.0)  # mid-download: the run holds both of the host's slots
worker = multiprocessing.get_context("fork").Process(target=child, daemon=True)
worker.start()
thread.join()
print("parent", results[0][0].status, flush=True)
sys.stdin.readline()  # the test's next download runs while the worker lives
worker.terminate()
worker.join()
"""


def test_a_forked_child_does_not_keep_the_parents_connection_slots(origin, home, tmp_path, monkeypatch):
    """The slots a run holds (engine/shared_budget.py) are locks of an open file description,
    dropped when the run closes its file; a forked child shares that description, so they
    stayed taken for as long as the child lived: the user's next download from the host
    waited for a connection that never came."""
    monkeypatch.setenv("PREFETCH_HOST_CONNECTIONS", "2")
    big = os.urandom(6 * MiB)
    origin.put("big.bin", big)
    origin.put("next.bin", os.urandom(100_000))
    origin.rate = 2 * MiB  # ~1.5 s with two connections: the fork comes mid-download
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    holder = subprocess.Popen([sys.executable, str(script), origin.url_for("big.bin"), str(tmp_path / "big.bin")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=tmp_path)
    try:
        assert holder.stdout.readline().strip() == "parent downloaded", holder.stderr.read()[-3000:]
        nxt = subprocess.run([sys.executable, "-c", "import sys, prefetch; "
                              "prefetch.ensure(sys.argv[1], output=sys.argv[2], progress=False); print('ok')",
                              origin.url_for("next.bin"), str(tmp_path / "next.bin")],
                             capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert nxt.returncode == 0 and nxt.stdout.strip() == "ok", nxt.stderr[-2000:]
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert (tmp_path / "big.bin").read_bytes() == big


HF_HOLDER = r"""
import multiprocessing, sys, threading, time
import prefetch

results = []

def download():
    results.append(prefetch.ensure("hf://acme/tiny", connections=1, progress=False))

def child():  # a DataLoader worker: lives for the whole epoch
    time.sleep(600)

thread = threading.Thread(target=download)
thread.start()
time.sleep(1.5)  # mid-download of the weights' blob: its lock (.locks/.../SHA.lock) is held
worker = multiprocessing.get_context("fork").Process(target=child, daemon=True)
worker.start()
thread.join()
print("parent", sorted({r.status for r in results[0]}), flush=True)
sys.stdin.readline()
worker.terminate()
worker.join()
"""


def test_a_forked_child_does_not_keep_the_parents_hub_blob_lock(hub, hf_env, home, tmp_path):
    """A Hub blob's lock is an ``flock`` (huggingface_hub's own), released by closing its
    descriptor; a child forked while it was held shares the descriptor's open file, so the
    lock stayed held for as long as the child lived: the next download of the blob (prefetch's
    or huggingface_hub's) waited for it."""
    from tests.test_hf import WEIGHTS

    hub.cdn.total_rate = 1 * MiB  # the 3 MiB weights take ~3 s: the fork comes mid-blob
    script = tmp_path / "holder.py"
    script.write_text(HF_HOLDER)
    holder = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert holder.stdout.readline().strip() == "parent ['downloaded']", holder.stderr.read()[-3000:]
        hub.cdn.total_rate = None
        blobs = home / "hf" / "hub" / "models--acme--tiny" / "blobs"
        weights = [b for b in blobs.iterdir() if b.stat().st_size == len(WEIGHTS)]
        assert len(weights) == 1
        weights[0].unlink()  # (gone: the next ensure fetches it again, under the blob's lock)
        again = subprocess.run([sys.executable, "-c", "import prefetch; prefetch.ensure('hf://acme/tiny', "
                                "progress=False); print('ok')"], capture_output=True, text=True, timeout=60,
                               cwd=tmp_path)
        assert again.returncode == 0 and again.stdout.strip() == "ok", again.stderr[-2000:]
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert weights[0].read_bytes() == WEIGHTS
