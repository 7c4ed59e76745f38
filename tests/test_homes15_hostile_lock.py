"""The lock beside a target (``<final>.part.lock``, fs/beside_locks.py) in a hostile shared folder.

A sticky, world-writable folder like /tmp and a real second user (uid 65534) planting at the
lock's name: a link is refused in one line and never followed, a FIFO never blocks, a lock
file the other user left is used read-only and left to them, a lock they hold makes the run
wait (and a timeout or a stop names them).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from prefetch.errors import ExitCode, InterruptedTransferError, LockTimeoutError
from prefetch.fs.beside_locks import beside_lock
from prefetch.fs.locks import beside_is_held
from tests.test_bad_input import one_error_line
from tests.test_shared_cache import (DATA, OTHER, SHA, VICTIM_BYTES, as_other_user, get_url, shared,  # noqa: F401
                                     victim)


def test_a_link_planted_at_the_lock_is_refused_and_never_followed(cli, origin, shared, victim):  # noqa: F811
    origin.put("d.bin", DATA)
    out = shared / "d.bin"
    as_other_user(lambda: os.symlink(victim, f"{out}.part.lock"))
    line = one_error_line(get_url(cli, origin, out, "--sha256", SHA), ExitCode.FILESYSTEM)
    assert f"{out}.part.lock" in line and "symbolic link" in line
    assert victim.read_bytes() == VICTIM_BYTES
    assert os.path.islink(f"{out}.part.lock")  # left for its owner
    assert not out.exists() and not origin.data_requests("d.bin")


def test_a_fifo_planted_at_the_lock_is_refused_without_blocking(cli, origin, shared):  # noqa: F811
    origin.put("d.bin", DATA)
    out = shared / "d.bin"
    as_other_user(lambda: os.mkfifo(f"{out}.part.lock"))
    line = one_error_line(get_url(cli, origin, out, "--sha256", SHA), ExitCode.FILESYSTEM)
    assert f"{out}.part.lock" in line
    assert not out.exists() and not origin.data_requests("d.bin")


def test_a_lock_file_another_user_left_is_used_read_only_and_left_to_them(cli, origin, shared):  # noqa: F811
    origin.put("d.bin", DATA)
    out = shared / "d.bin"
    lock = shared / "d.bin.part.lock"
    as_other_user(lambda: lock.write_bytes(b'{"pid": "junk"'))  # a killed run's, or junk: not a lock held
    done = get_url(cli, origin, out, "--sha256", SHA)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == DATA
    assert lock.stat().st_uid == OTHER and lock.read_bytes() == b'{"pid": "junk"'  # never written, and kept
    # (their sticky folder: not ours to unlink)


def _hold_as_other(path, ready, release):
    """A process of the other user holding ``path``'s beside lock until ``release`` exists."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.setgroups([])
            os.setgid(OTHER)
            os.setuid(OTHER)
            with beside_lock(path, timeout=0):
                open(ready, "w").close()
                while not os.path.exists(release):
                    time.sleep(0.02)
            code = 0
        finally:
            os._exit(code)
    return pid


def test_a_lock_another_user_holds_is_waited_for_and_named(shared):  # noqa: F811
    if os.geteuid() != 0:
        pytest.skip("a second user needs root")
    target = shared / "d.bin"
    ready, release = shared / "ready", shared / "release"
    pid = _hold_as_other(target, ready, release)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert beside_is_held(target)
        seen = []
        with pytest.raises(LockTimeoutError) as timed_out:
            with beside_lock(target, timeout=0.3, on_wait=seen.append):
                pass
        assert f"another user, uid {OTHER}" in str(timed_out.value) and str(target) in str(timed_out.value)
        assert len(seen) == 1 and f"another user, uid {OTHER}" in seen[0].describe()
        stop = threading.Event()
        threading.Timer(0.2, stop.set).start()
        with pytest.raises(InterruptedTransferError):
            with beside_lock(target, timeout=60, stop=stop):
                pass
        release.touch()  # the holder lets go (and unlinks the lock it made): ours then
        with beside_lock(target, timeout=30) as waited:
            assert beside_is_held(target) is True
        assert not beside_is_held(target)
        assert waited in (True, False)
    finally:
        release.touch()
        os.waitpid(pid, 0)
    assert not (shared / "d.bin.part.lock").exists()


def test_a_file_of_the_users_at_the_locks_name_is_never_written_or_removed(cli, origin, tmp_path):
    """A file the user keeps under the name (not a lock prefetch left: not empty, no owner record)."""
    origin.put("d.bin", DATA)
    out = tmp_path / "d.bin"
    mine = tmp_path / "d.bin.part.lock"
    mine.write_bytes(b"my notes\n")
    done = get_url(cli, origin, out, "--sha256", SHA)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == DATA
    assert mine.read_bytes() == b"my notes\n"


def test_a_lock_our_killed_run_left_is_taken_and_removed(cli, origin, tmp_path):
    origin.put("d.bin", DATA)
    out = tmp_path / "d.bin"
    left = tmp_path / "d.bin.part.lock"
    left.write_bytes(b'{"pid": 1, "host": "gone", "started": 1.0, "target": "x", "job": null}' + b" " * 200)
    done = get_url(cli, origin, out, "--sha256", SHA)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == DATA and not left.exists()


def test_a_directory_at_the_locks_name_is_one_line(cli, origin, tmp_path):
    origin.put("d.bin", DATA)
    out = tmp_path / "d.bin"
    (tmp_path / "d.bin.part.lock").mkdir()
    line = one_error_line(get_url(cli, origin, out, "--sha256", SHA), ExitCode.FILESYSTEM)
    assert "d.bin.part.lock" in line and "directory" in line
    assert not out.exists()


def test_a_get_waits_for_a_part_another_runs_bulk_lane_holds(cli, origin, tmp_path):
    """The bulk lane holds an flock on each .part it makes until the file is placed (no lock file):
    a get of that file from another home waits for it, then finds the file in place."""
    origin.put("d.bin", DATA)
    out = tmp_path / "d.bin"
    go = tmp_path / "go"
    (tmp_path / "data").write_bytes(DATA)
    lane = subprocess.Popen([sys.executable, "-c", LANE, str(out), str(go), str(tmp_path / "data")],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert lane.stdout.readline().strip() == "held"
        getter = subprocess.Popen([sys.executable, "-m", "prefetch", "get", origin.url_for("d.bin"), "-o", str(out),
                                   "--sha256", SHA], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not os.path.exists(f"{out}.part.lock"):  # the getter holds the lock beside the file, and waits
            assert time.monotonic() < deadline and getter.poll() is None
            time.sleep(0.02)
        time.sleep(0.3)
        assert getter.poll() is None, getter.communicate()  # (still waiting: it did not take the .part)
    finally:
        go.touch()
    stdout, stderr = getter.communicate(timeout=60)
    lane.wait(timeout=30)
    assert getter.returncode == 0, stderr
    assert "waiting for another run, which is writing this file's .part" in stderr
    assert "cached" in stdout
    assert out.read_bytes() == DATA and not origin.data_requests("d.bin")


# A stand-in for another run's bulk lane: a new .part (O_EXCL), flock'ed, renamed when told.
LANE = """
import fcntl, os, sys, time
out, go, data = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read()
fd = os.open(out + ".part", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.write(fd, data)
print("held", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
os.rename(out + ".part", out)
os.close(fd)
"""
