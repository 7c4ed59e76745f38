"""Per-target locks without a file per target (issue 19): on Linux every target of a locks dir
is a byte of one shared file, locked per open file description (``fs/rangelocks.py``); the
holder's record is written in that file and read by whoever waits. Elsewhere a lock file per
target, with the record in it; another user's lock file keeps the ``.owner`` beside it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from prefetch.errors import LockTimeoutError
from prefetch.fs import rangelocks
from prefetch.fs.locks import hold_lock, lock_is_held, lock_path, read_owner, shared_lock_path

needs_ofd = pytest.mark.skipif(not rangelocks.AVAILABLE, reason="no OFD locks here: a lock file per target")


@needs_ofd
def test_the_owner_is_recorded_in_the_shared_file_while_held_and_no_file_is_made_per_target(tmp_path):
    locks = tmp_path / "locks"
    targets = [tmp_path / f"data{i}.bin" for i in range(20)]
    with hold_lock(locks, targets[0], timeout=1.0, job="j1") as waited:
        assert not waited
        owner = read_owner(lock_path(locks, targets[0]))
        assert owner is not None and owner.pid == os.getpid() and owner.job == "j1"
        assert owner.target == str(targets[0])
        assert read_owner(lock_path(locks, targets[1])) is None, "another target's record is not this one's"
        assert lock_is_held(locks, targets[0]) and not lock_is_held(locks, targets[1])
    for target in targets:
        with hold_lock(locks, target, timeout=1.0):
            pass
    assert read_owner(lock_path(locks, targets[0])) is None  # released: no owner left behind
    assert not lock_is_held(locks, targets[0])
    assert sorted(p.name for p in locks.iterdir()) == [shared_lock_path(locks).name]  # one inode for all


@needs_ofd
def test_a_long_target_is_recorded_by_its_end(tmp_path):
    locks, target = tmp_path / "locks", tmp_path / ("x" * 200) / ("y" * 200 + ".bin")
    with hold_lock(locks, target, timeout=1.0, job="j2"):
        owner = read_owner(lock_path(locks, target))
        assert owner is not None and owner.job == "j2" and str(target).endswith(owner.target.lstrip("."))


_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from prefetch.fs.locks import hold_lock
    with hold_lock(Path(sys.argv[1]), Path(sys.argv[2]), timeout=5, job="holder"):
        print("held", flush=True)
        time.sleep(60)
""")


def test_another_process_waits_sees_the_holder_and_gets_the_lock_when_it_dies(tmp_path):
    locks, target, other = tmp_path / "locks", tmp_path / "file.bin", tmp_path / "other.bin"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(locks), str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lock_is_held(locks, target)
        seen = []
        with pytest.raises(LockTimeoutError, match=f"pid {holder.pid}"):
            with hold_lock(locks, target, timeout=0.3, on_wait=seen.append):
                pass
        assert seen and seen[0] is not None and seen[0].pid == holder.pid and seen[0].job == "holder"
        with hold_lock(locks, other, timeout=0) as waited:  # another target of the same dir is free
            assert waited is False
        got = []

        def take() -> None:
            with hold_lock(locks, target, timeout=10) as waited:
                got.append(waited)

        thread = threading.Thread(target=take)
        thread.start()
        time.sleep(0.3)
        assert got == [], "held by the other process: this one waits"
        holder.send_signal(signal.SIGKILL)  # the kernel drops a dead holder's lock: never stale
        thread.join(10)
        assert got == [True]
    finally:
        holder.kill()
        holder.wait()
    assert not lock_is_held(locks, target)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_and_its_parent_exclude_each_other(tmp_path):
    """OFD locks belong to an open file description, which a fork shares: the child opens its own."""
    locks, target, mine = tmp_path / "locks", tmp_path / "file.bin", tmp_path / "mine.bin"
    with hold_lock(locks, mine, timeout=1):  # (the parent's shared file is open when it forks)
        ready_r, ready_w = os.pipe()
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 0
            try:
                try:
                    with hold_lock(locks, mine, timeout=0):
                        code = 1  # got the lock its parent holds
                except LockTimeoutError:
                    pass
                with hold_lock(locks, target, timeout=1):
                    os.write(ready_w, b"x")
                    os.read(done_r, 1)
            except BaseException:  # noqa: BLE001
                code = 2
            os._exit(code)
        try:
            assert os.read(ready_r, 1) == b"x"
            with pytest.raises(LockTimeoutError):
                with hold_lock(locks, target, timeout=0.2):
                    pass
        finally:
            os.write(done_w, b"x")
            _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "the child must wait for its parent's lock"
        assert lock_is_held(locks, mine), "the child's exit does not release the parent's lock"
        with hold_lock(locks, target, timeout=1) as waited:
            assert waited is False
    assert not lock_is_held(locks, mine)


def test_an_owner_file_beside_the_lock_is_still_read(tmp_path):
    import json

    path = lock_path(tmp_path, tmp_path / "x.bin")
    path.write_bytes(b"")
    path.with_suffix(".owner").write_text(json.dumps({"pid": 7, "host": "h", "started": 1.0, "target": "x"}))
    assert read_owner(path).pid == 7
