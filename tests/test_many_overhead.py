"""The per-file cost of many small files (#19) without losing a per-file guarantee.

* a small file complete in its first answer gets no resume record, yet a kill mid-list
  and a resume re-send at most each unfinished file once, and nothing placed is touched;
* locks are one ``flock`` per file: a second holder waits (naming the first), times out,
  or stops within a fraction of a second;
* the environment (proxies, ``.netrc``) is read once per client and host, not per request;
* on a short route at most ``SHORT_ROUTE_FILES`` files are in flight; a long route keeps them all.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import sigkill_when, start_cli
from tests.nginx import NginxServer


def _files(root: Path, count: int, size: int) -> dict[str, bytes]:
    files = {}
    for i in range(count):
        name = f"s{i:04d}.bin"
        (root / name).write_bytes(data := os.urandom(size))
        files[name] = data
    return files


def test_a_small_complete_file_gets_no_state_record_but_its_part_is_flushed(tmp_path, monkeypatch):
    from prefetch.engine.resume_state import SMALL_FILE, StateSaver, TransferState

    synced = []
    monkeypatch.setattr(os, "fdatasync", lambda fd: synced.append(fd))
    part, record = tmp_path / "a.part", tmp_path / "a.part.json"
    part.write_bytes(b"x" * 100)
    fd = os.open(part, os.O_RDWR)
    try:
        saver = StateSaver(record, part, sync=True, on_error=None)
        saver.save((TransferState(urls=["u"], size=100, done=[[0, 100]]), 100, fd))
        assert record.exists(), "by default (an archive extracted before its rename) the record is kept"
        record.unlink()
        synced.clear()
        saver = StateSaver(record, part, sync=True, on_error=None)
        saver.save((TransferState(urls=["u"], size=100, done=[[0, 100]]), 100, fd), small_record=False)
        assert synced == [fd], "the complete .part is flushed before its rename"
        assert not record.exists(), "a small file complete at once and placed next needs no record"

        saver = StateSaver(record, part, sync=True, on_error=None)  # not complete yet: recorded
        saver.save((TransferState(urls=["u"], size=100, done=[[0, 50]]), 50, fd), small_record=False)
        assert record.exists()
        saver.save((TransferState(urls=["u"], size=100, done=[[0, 100]]), 100, fd), small_record=False)
        assert '"done": [\n  [\n   0,\n   100' in record.read_text(), "once written, the record follows to the end"

        record.unlink()
        big = SMALL_FILE + 1
        saver = StateSaver(record, part, sync=True, on_error=None)
        saver.save((TransferState(urls=["u"], size=big, done=[[0, big]]), big, fd), small_record=False)
        assert record.exists(), "a big file keeps its record until the flow renames it"
    finally:
        os.close(fd)


def test_a_kill_mid_list_of_small_files_then_resume_resends_at_most_each_file_once(home, tmp_path, cli):
    """SIGKILL while a list of small files (no resume records for them) is half placed: the same
    command finishes it, every file is right, a placed file is not sent again and an unplaced
    one is sent at most once more."""
    root = tmp_path / "www"
    root.mkdir()
    size = 48 << 10
    files = _files(root, 120, size)
    with NginxServer(root, limit_rate="400k") as server:
        listing = tmp_path / "urls.txt"
        listing.write_text("".join(f"{server.url_for(n)} sha256={hashlib.sha256(d).hexdigest()}\n"
                                   for n, d in files.items()))
        out = tmp_path / "out"
        out.mkdir()
        # The usual path (files placed one by one); the bulk lane places a chunk at once, and
        # nginx's limit_rate lets a 48 KiB answer out at once (its first second's allowance):
        # test_bulk_stop kills the lane mid-chunk.
        proc = start_cli("get", "-i", str(listing), "-P", str(out), "--host-connections", "4", "-q",
                         env={**os.environ, "PREFETCH_BULK": "0"})
        placed = lambda: [n for n in files if (out / n).exists()]  # noqa: E731
        sigkill_when(proc, lambda: len(placed()) >= 20, what="20 files placed")
        before = set(placed())
        for name in before:
            assert (out / name).read_bytes() == files[name], "a final path holds only a complete file"
        first = len(server.requests())
        again = cli("get", "-i", str(listing), "-P", str(out), "--host-connections", "4", "-q")
        assert again.returncode == 0, again.stderr
        for name, data in files.items():
            assert (out / name).read_bytes() == data, name
        assert not [p.name for p in out.iterdir() if p.name not in files], "no .part or record left"
        log = server.requests()
    resent: dict[str, int] = {}
    for r in log[first:]:
        name = r[6].split()[1].lstrip("/")
        resent[name] = resent.get(name, 0) + r[5]
    assert not before & set(resent), "a placed file is not fetched again"
    assert all(n <= size for n in resent.values()), max(resent.values())
    assert 0 < len(before) < len(files)


def test_a_lock_waits_names_its_holder_times_out_and_stops_quickly(tmp_path):
    from prefetch.errors import InterruptedTransferError, LockTimeoutError
    from prefetch.fs.locks import hold_lock, lock_is_held

    locks, target = tmp_path / "locks", tmp_path / "file.bin"
    seen = []
    with hold_lock(locks, target, timeout=1) as waited:
        assert waited is False and lock_is_held(locks, target)
        with pytest.raises(LockTimeoutError, match=f"pid {os.getpid()}"):
            with hold_lock(locks, target, timeout=0.3, on_wait=seen.append):
                pass
        assert seen and seen[0].pid == os.getpid(), "the waiter waited, and is told who holds it"
        # A stop ends a wait whose timeout (600 s) is far off: InterruptedTransferError, not the
        # LockTimeoutError that only the timeout's end would raise (a thread's 120 s join guards a hang).
        stop = threading.Event()
        waits: list = []
        box: dict = {}

        def wait_stopped() -> None:
            try:
                with hold_lock(locks, target, timeout=600, stop=stop, on_wait=waits.append):
                    pass
            except BaseException as exc:  # noqa: BLE001
                box["error"] = exc

        waiter = threading.Thread(target=wait_stopped, daemon=True)
        waiter.start()
        while not waits and waiter.is_alive():
            waiter.join(0.01)  # (until it waits for the lock)
        stop.set()
        waiter.join(120)
        assert not waiter.is_alive(), "a stop ends the wait"
        assert isinstance(box.get("error"), InterruptedTransferError), box
    assert not lock_is_held(locks, target)
    assert not list(locks.glob("*.owner")), "the owner file goes with the lock"

    got = []

    def second() -> None:
        with hold_lock(locks, target, timeout=10) as waited:
            got.append(waited)

    with hold_lock(locks, target, timeout=1):
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.2)
        assert got == [], "a second holder in the same process waits"
    thread.join(5)
    assert got == [True]


def test_a_planted_link_at_a_lock_name_is_refused(tmp_path):
    from prefetch.errors import PrefetchError
    from prefetch.fs import rangelocks
    from prefetch.fs.locks import hold_lock, lock_path, shared_lock_path

    locks, target = tmp_path / "locks", tmp_path / "file.bin"
    locks.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (shared_lock_path(locks) if rangelocks.AVAILABLE else lock_path(locks, target)).symlink_to(victim)
    with pytest.raises(PrefetchError):
        with hold_lock(locks, target, timeout=0):
            pass
    assert victim.read_text() == "keep me"


def test_the_environment_is_read_once_per_client_and_host(home, tmp_path, monkeypatch):
    import requests.utils

    from prefetch.net.http import Client, open_url

    root = tmp_path / "www"
    root.mkdir()
    files = _files(root, 5, 1000)
    calls = []
    real = requests.utils.get_netrc_auth
    monkeypatch.setattr(requests.utils, "get_netrc_auth", lambda url, *a: calls.append(url) or real(url, *a))
    netrc = tmp_path / "netrc"
    netrc.write_text("machine elsewhere.example login u password p\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    def fetch_all(server):
        with Client() as client:
            for name, data in files.items():
                resp, _ = open_url(client, server.url_for(name))
                assert resp.read() == data
                resp.close()

    with NginxServer(root) as server:
        fetch_all(server)
        assert len(calls) == 1, calls
        # No netrc file anywhere: nothing to look up (requests is not even imported for it).
        monkeypatch.delenv("NETRC")
        monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
        fetch_all(server)
        assert len(calls) == 1, calls


def test_a_short_route_keeps_few_files_in_flight_and_a_long_one_all(tmp_path):
    from prefetch.engine.hosts import SHORT_ROUTE_FILES, Hosts
    from prefetch.engine.many import run_in_order

    hosts = Hosts(long_route=0.04)
    assert hosts.files_now(32) == 32, "no host answered yet: all of them"
    near = hosts.host_for("http://127.0.0.1:1/a")
    near.route.add(0.3)  # the first answers of a busy machine look like a long route...
    assert hosts.files_now(32) == 32
    near.route.add(0.001)  # ...until one comes back quicker than any long route can
    assert hosts.files_now(32) == min(32, SHORT_ROUTE_FILES)
    far = hosts.host_for("http://example.org/b")
    for _ in range(5):
        far.route.add(0.2)
    assert hosts.files_now(32) == 32, "a long route in the run keeps every file in flight"

    running, peak, lock = [0], [0], threading.Lock()

    def one(i: int) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.01)
        with lock:
            running[0] -= 1

    run_in_order(60, one, workers=16, stop=threading.Event(), limit=lambda busy: 3)
    assert peak[0] == 3


def test_a_near_host_keeps_as_many_files_in_flight_as_keep_the_process_busy():
    """On a short route the files in flight follow how busy they keep the process: one when
    one file already keeps it at ~1 CPU second a second (on loopback more files only add
    interpreter-lock hand-offs), more while it waits, never more than SHORT_ROUTE_FILES;
    a long route keeps every worker."""
    from prefetch.engine.hosts import SHORT_ROUTE_FILES, Hosts

    hosts = Hosts(long_route=0.04)
    near = hosts.host_for("http://127.0.0.1:1/a")
    near.route.add(0.0003)
    few = min(32, SHORT_ROUTE_FILES)
    assert hosts.files_now(32, None) == few, "nothing measured yet: as before"
    assert hosts.files_now(32, (1.1, 8.0)) == 6, "8 files keep it at 1.1: fewer"
    assert hosts.files_now(32, (0.98, 1.0)) == 1, "one file keeps it busy: one"
    assert hosts.files_now(32, (0.3, 2.0)) == 6, "2 files keep it at 0.3: more"
    assert hosts.files_now(32, (0.05, 1.0)) == few, "a server slow to send its bodies: all of them"
    assert hosts.files_now(3, (0.05, 1.0)) == 3, "never more than the workers"
    far = hosts.host_for("http://example.org/b")
    for _ in range(5):
        far.route.add(0.2)
    assert hosts.files_now(32, (1.1, 8.0)) == 32, "a long route in the run keeps every file in flight"


def test_run_in_order_hands_limit_how_busy_the_files_keep_the_process():
    """Busy.now: the files' CPU seconds on their own threads per second over the recent file
    ends, with the files in flight then; files that only wait keep it idle (even while another
    thread of the process computes: a training loop in the same kernel is not the files'),
    files that compute keep it busy."""
    from prefetch.engine.many import run_in_order

    def measure(one, files: int) -> list:
        seen: list = []

        def limit(busy):
            seen.append(busy)
            return files

        run_in_order(24, one, workers=4, stop=threading.Event(), limit=limit)
        return seen

    def sleeps(i: int) -> None:  # long enough that a thread's wake-up (its share of a busy
        time.sleep(0.05)          # interpreter's lock hand-offs) stays a small part of it

    lent: list = []  # (CPU seconds, wall seconds) of each computing file: the share of a core this machine lends it

    def computes(i: int) -> None:
        began, end = time.monotonic(), time.thread_time() + 0.01
        while time.thread_time() < end:
            pass
        lent.append((0.01, time.monotonic() - began))

    other_stop = threading.Event()

    def other() -> None:  # another thread of the process, busy all along
        while not other_stop.is_set():
            pass

    other_thread = threading.Thread(target=other, daemon=True)
    other_thread.start()
    try:
        idle = measure(sleeps, 2)
    finally:
        other_stop.set()
        other_thread.join()
    assert idle[0] is None, "nothing is known before the first files end"
    idle = [b for b in idle if b is not None]
    assert idle and all(b[0] < 0.2 for b in idle), idle
    assert all(1.0 <= b[1] <= 2.0 for b in idle), "up to 2 files in flight"
    busy = [b for b in measure(computes, 1) if b is not None]
    # One computing file at a time keeps the process as busy as the machine lets a thread be: a
    # quiet machine lends it a core, a loaded one (the CI's) a fraction; measured by the files
    # themselves, not assumed. (Counted as idle, or as the idle files' reading, it fails.)
    share = sum(cpu for cpu, _ in lent) / sum(wall for _, wall in lent)
    assert busy and max(b[0] for b in busy) > max(0.5 * share, 2 * max(b[0] for b in idle)), (busy, share)
    assert all(b[1] == 1.0 for b in busy), "one file in flight"


def test_the_api_bar_of_many_files_is_one_summary_at_a_constant_cost_per_event(monkeypatch):
    import prefetch.ui.progress as progress
    from prefetch.model.events import Event, EventKind

    made = []

    class FakeBar:
        def __init__(self, **kw):
            self.total, self.n, self.desc, self.refreshed = kw["total"], 0, kw["desc"], 0
            made.append(self)

        def set_description_str(self, desc, refresh=True):
            self.desc = desc

        def refresh(self):
            self.refreshed += 1

        def update(self, n):
            self.n += n

        def close(self):
            pass

    monkeypatch.setattr(progress, "_tqdm", lambda: FakeBar)
    bar = progress.ProgressBar()
    started = time.process_time()
    for i in range(3000):
        name = f"f{i}.bin"
        bar(Event(EventKind.START, name, done=0, total=100))
        bar(Event(EventKind.PROGRESS, name, done=60, total=100))
        bar(Event(EventKind.DONE, name, done=100, total=100))
    bar.close()
    assert time.process_time() - started < 3, "no sum over every file per event"
    (one,) = made
    assert (one.n, one.total, one.desc) == (300000, 300000, "3000/3000 files")
    assert one.refreshed <= 8


def test_the_hub_blob_lock_is_the_one_huggingface_hub_takes(tmp_path):
    """prefetch's flock on huggingface_hub's .locks file waits while filelock (huggingface_hub's
    lock) holds it, says so once, takes it when released, and a stop ends the wait."""
    from types import SimpleNamespace

    from filelock import FileLock

    from prefetch.errors import InterruptedTransferError
    from prefetch.hf.blob_lock import blob_lock

    notes = []
    ctx = SimpleNamespace(stop=threading.Event(), progress=SimpleNamespace(emit=notes.append))
    path = tmp_path / ".locks" / "models--acme--x" / "abc.lock"
    with blob_lock(path, ctx, "x"):  # makes its dir on first use
        assert path.exists()
    theirs = FileLock(str(path))
    theirs.acquire()
    got = []

    def ours() -> None:
        with blob_lock(path, ctx, "x"):
            got.append(True)

    thread = threading.Thread(target=ours)
    thread.start()
    for _ in range(6000):  # (until it says it waits: 60 s at most)
        if notes:
            break
        time.sleep(0.01)
    time.sleep(0.3)  # (a second note or a lock taken regardless would come in this while)
    assert got == [] and len(notes) == 1, "waits while huggingface_hub holds it, and says so once"
    theirs.release()
    thread.join(60)
    assert got == [True], "takes it once huggingface_hub released it"
    theirs.acquire()
    threading.Timer(0.2, ctx.stop.set).start()
    with pytest.raises(InterruptedTransferError):
        with blob_lock(path, ctx, "x"):
            pass
    theirs.release()


def test_partials_left_in_a_list_of_new_files_are_resumed_not_fetched_again(home, tmp_path, cli):
    """Most files of a list are new (no ``.part``, no record: flow/files.py looks once and tells
    the engine); the few a killed run left half done, with their records, still resume from
    where they stopped, once the host is known to be near (the one-answer path)."""
    import urllib.request

    from prefetch.engine.resume_state import TransferState, save_state

    root = tmp_path / "www"
    root.mkdir()
    size = 16 << 10
    files = _files(root, 60, size)
    out = tmp_path / "out"
    out.mkdir()
    with NginxServer(root) as server:
        left = [f"s{i:04d}.bin" for i in (40, 45, 50)]  # (after the first files: the host answered quickly)
        for name in left:
            url = server.url_for(name)
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD")) as answer:
                validators = {"etag": answer.headers["ETag"], "last_modified": answer.headers["Last-Modified"]}
            (out / f"{name}.part").write_bytes(files[name][:size // 2] + bytes(size // 2))
            save_state(out / f"{name}.part.json", TransferState(urls=[url], size=size, validators={url: validators},
                                                                 done=[[0, size // 2]]))
        listing = tmp_path / "urls.txt"
        listing.write_text("".join(f"{server.url_for(n)} sha256={hashlib.sha256(d).hexdigest()}\n"
                                   for n, d in files.items()))  # (with a hash, kept bytes are not sampled again)
        first = len(server.served())
        proc = cli("get", "-i", str(listing), "-P", str(out), "--host-connections", "1", "-q")
        assert proc.returncode == 0, proc.stderr
        served = server.served()[first:]
    for name, data in files.items():
        assert (out / name).read_bytes() == data, name
    assert sorted(p.name for p in out.iterdir()) == sorted(files), "no .part or record left"
    for name in left:
        asked = [(body, rng) for body, _status, _conn, rng, line in served if f"/{name} " in line]
        assert asked and all(rng.startswith(f"bytes={size // 2}-") for _, rng in asked), (name, asked)
        assert sum(body for body, _ in asked) == size // 2, "only the missing half is sent"


def test_a_list_is_planned_once_per_get(home, tmp_path, monkeypatch):
    """``get -i LIST`` (and ``prefetch.ensure``) check the request before any output and then run
    those plans: the list is planned once, not once to check and again to run."""
    import prefetch
    from prefetch.cli import main
    from prefetch.flow.planners.urls import UrlPlanner

    root = tmp_path / "www"
    root.mkdir()
    files = _files(root, 6, 2000)
    planned = []
    real = UrlPlanner.plan
    monkeypatch.setattr(UrlPlanner, "plan", lambda self, names, ctx: planned.append(1) or real(self, names, ctx))
    with NginxServer(root) as server:
        listing = tmp_path / "urls.txt"
        listing.write_text("".join(f"{server.url_for(n)}\n" for n in files))
        out = tmp_path / "out"
        with pytest.raises(SystemExit) as exit_:
            main(["get", "-i", str(listing), "-P", str(out), "-q"])
        assert exit_.value.code == 0
        assert {p.name: p.read_bytes() for p in out.iterdir()} == files
        assert len(planned) == 1, "the list was planned again to run it"
        planned.clear()
        name = next(iter(files))
        (result,) = prefetch.ensure(server.url_for(name), output_dir=str(tmp_path / "api"), progress=False)
        assert Path(result.path).read_bytes() == files[name] and len(planned) == 1
