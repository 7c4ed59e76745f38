"""A DataLoader that forks its workers while this process downloads: the workers inherit a copy of
every socket and of the process's one deadline watchdog (``net/deadlines.py``) with its bookings;
none of that may touch this process's own downloads (real torch, fork start method)."""

from __future__ import annotations

import hashlib
import os

import prefetch
from tests.origin import Delay
from tests.test_jobs import poll
from tests.test_stream_review14_loader import unix_sockets  # noqa: F401 - fixture

KiB = 1 << 10


def test_a_forked_worker_never_fires_the_parents_head_deadline_on_its_socket(origin, home, tmp_path,
                                                                              unix_sockets):  # noqa: F811
    """The parent books its head deadline (PREFETCH_READ_TIMEOUT, 3 s here) and cancels it when the
    head comes after 2 s. A worker forked in between inherited the booking uncancelled; its
    watchdog, started by its own first request, shut the parent's connection down at 3 s, in the
    middle of the parent's body: a reset and a second request for the same file."""
    from torch.utils.data import DataLoader

    slow = os.urandom(1 << 20)
    origin.put("slow.bin", slow)
    origin.put("small.bin", os.urandom(16 * KiB))
    origin.add_fault(Delay(2.0, path="slow.bin"))  # the head after 2 s: the parent's deadline is booked
    origin.total_rate = 160 * KiB  # the body from 2 s to ~8 s
    sha = hashlib.sha256(slow).hexdigest()
    paths = prefetch.as_completed(origin.url_for("slow.bin") + "#sha256=" + sha, output_dir=str(tmp_path / "parent"),
                                  connections=1, progress=False)
    poll(lambda: origin.data_requests("slow.bin"), what="the parent's request")
    dataset = prefetch.torch_dataset(origin.url_for("small.bin"), output_dir=str(tmp_path / "worker"), progress=False)
    it = iter(DataLoader(dataset, batch_size=None, num_workers=1, multiprocessing_context="fork"))  # forks now
    assert next(it) == str(tmp_path / "worker" / "small.bin")  # the worker made its request, and stays up
    assert [p.read_bytes() == slow for p in paths] == [True]
    del it
    assert len(origin.data_requests("slow.bin")) == 1  # one request: nothing broke the parent's connection


def test_a_worker_forked_during_a_parents_inline_request_still_stops_its_own(origin, home, tmp_path,
                                                                             unix_sockets, monkeypatch):  # noqa: F811
    """A worker forked while the parent waits inline for a head (a small file's request, watched by
    the process's one inline booking): with the parent's bookings dropped in the child, a stop in
    the worker still ends its own inline head wait, and leaving the loop does not wait out the
    head deadline (this passed before the fork change too; it guards that change)."""
    from torch.utils.data import DataLoader

    monkeypatch.setenv("PREFETCH_READ_TIMEOUT", "30")  # a head wait ends by the stop, not the deadline
    for name in ("parent.bin", "w0.bin", "w1.bin"):
        origin.put(name, os.urandom(16 * KiB))
    origin.add_fault(Delay(4.0, path="parent.bin"))  # the parent waits inline for this head ...
    origin.add_fault(Delay(60.0, path="w1.bin"))  # ... and the worker for this one
    paths = prefetch.as_completed(origin.url_for("parent.bin"), output_dir=str(tmp_path / "parent"), progress=False)
    poll(lambda: origin.data_requests("parent.bin"), what="the parent's request")
    dataset = prefetch.torch_dataset([origin.url_for("w0.bin"), origin.url_for("w1.bin")], connections=1,
                                     max_ahead=1, output_dir=str(tmp_path / "worker"), progress=False)
    it = iter(DataLoader(dataset, batch_size=None, num_workers=1, multiprocessing_context="fork"))  # forks now
    assert next(it) == str(tmp_path / "worker" / "w0.bin")
    poll(lambda: origin.data_requests("w1.bin"), what="the worker's inline request")
    killed = []
    for worker in it._workers:
        worker.terminate = lambda w=worker, terminate=worker.terminate: (killed.append(w.pid), terminate())
    del it  # the loop left: the worker's stream stops, and its head wait with it
    assert killed == []
    assert [p.name for p in paths] == ["parent.bin"]  # the parent's own request went its way
