"""Two prefetch homes, or two users, writing one path exclude each other (fs/beside_locks.py).

The per-target locks live in each run's state dir (PREFETCH_HOME): two runs with different
homes, or two accounts with homes of their own pulling into one shared folder, both wrote the
same ``.part`` at once; nginx served the file twice and one run failed with exit 5 ("truncated
by another process"). Now the lock beside the target (``<final>.part.lock``) makes the second
run wait (one note line naming the holder) and find the first run's file in place.

Real processes and a real nginx with a per-connection rate (the first run still downloads
when the second starts); the bytes served are counted in nginx's log. The second account is
uid 65534 (tests/test_mend12b_second_uid.py's interpreter and copy of prefetch).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.nginx import NginxServer, nginx_binary
from tests.test_mend12b_second_uid import OTHER, PYTHON, _drop, other_python  # noqa: F401

SIZE = 3 << 20
DATA = random.Random(15).randbytes(SIZE)
SHA = hashlib.sha256(DATA).hexdigest()

pytestmark = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")


@pytest.fixture
def slow(tmp_path):
    """nginx serving big.bin at 256 KiB/s a connection: a few seconds for the file."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "big.bin").write_bytes(DATA)
    with NginxServer(root, limit_rate="256k") as server:
        yield server


@pytest.fixture
def folder():
    """A folder two accounts write: world-writable, not sticky (a team's /data/keras)."""
    path = Path(tempfile.mkdtemp(prefix="prefetch-team-", dir="/tmp"))
    os.chmod(path, 0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _homes(n: int) -> list[Path]:
    out = []
    for _ in range(n):
        path = Path(tempfile.mkdtemp(prefix="prefetch-home15-", dir="/tmp"))
        os.chmod(path, 0o755)
        out.append(path)
    return out


def _start(url: str, target: Path, home: Path, *extra: str, other: Path | None = None) -> subprocess.Popen:
    env = dict(os.environ, PREFETCH_HOME=str(home / ".prefetch"), HOME=str(home), XDG_STATE_HOME=str(home / ".s"),
               XDG_CONFIG_HOME=str(home / ".c"), KERAS_HOME=str(home / ".keras"), NO_PROXY="127.0.0.1,localhost")
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy"):
        env.pop(var, None)
    command = [sys.executable, "-m", "prefetch", "get", url, "-o", str(target), *extra]
    drop = None
    if other is not None:  # the second account: its interpreter, its copy of prefetch
        os.chown(home, OTHER, OTHER)
        env.update(PYTHONPATH=str(other), PYTHONDONTWRITEBYTECODE="1")
        command[0] = PYTHON[0]
        drop = _drop
    return subprocess.Popen(command, env=env, cwd=str(home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=drop)


def _until(what, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def _served(server: NginxServer) -> int:
    return sum(body for body, *_ in server.served())


def _two_runs(slow, folder: Path, *, other=None, first_other: bool = False):
    """The first run starts; once its ``.part`` has bytes (it is downloading), the second."""
    target = folder / "big.bin"
    homes = _homes(2)
    try:
        first = _start(slow.url_for("big.bin"), target, homes[0], "--sha256", SHA,
                       other=other if first_other else None)
        _until(lambda: (folder / "big.bin.part").exists() and (folder / "big.bin.part").stat().st_size > 0
               or first.poll() is not None)
        assert not target.exists(), "the first run ended before the second started: slow the origin down"
        second = _start(slow.url_for("big.bin"), target, homes[1], "--sha256", SHA,
                        other=None if first_other else other)
        outs = [first.communicate(timeout=120)]
        ended = time.time()  # (the second run, waiting, asked for nothing: every request ended before this)
        outs.append(second.communicate(timeout=120))
        assert all(end <= ended for _, _, _, end, *_ in slow.requests()), (ended, slow.requests())
        return (first.returncode, *outs[0]), (second.returncode, *outs[1])
    finally:
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)


def _check(slow, folder, first, second) -> None:
    assert first[0] == 0, first
    assert second[0] == 0, second
    assert "Traceback" not in first[2] + second[2]
    assert hashlib.sha256((folder / "big.bin").read_bytes()).hexdigest() == SHA
    assert sorted(p.name for p in folder.iterdir()) == ["big.bin"]  # no .part, no lock file left
    # The file crossed the wire once (a range the first run split may be asked twice in part;
    # without the lock both runs downloaded all of it).
    assert _served(slow) < SIZE * 3 // 2, slow.served()
    notes = [x for x in second[2].splitlines() if "waiting for" in x]
    assert len(notes) == 1 and "big.bin.part.lock" in notes[0] and "downloading this file" in notes[0], second[2]
    assert "cached" in second[1], second


def test_two_homes_one_target_download_it_once(slow, folder):
    first, second = _two_runs(slow, folder)
    _check(slow, folder, first, second)
    assert "pid " in [x for x in second[2].splitlines() if "waiting for" in x][0]  # the holder, named


def test_a_second_account_waits_for_the_first_and_finds_its_file(other_python, slow, folder):  # noqa: F811
    first, second = _two_runs(slow, folder, other=other_python)
    _check(slow, folder, first, second)
    assert "(another user, uid 0; lock " in second[2]  # root's run, named


def test_the_first_account_waits_for_a_second_accounts_download(other_python, slow, folder):  # noqa: F811
    first, second = _two_runs(slow, folder, other=other_python, first_other=True)
    _check(slow, folder, first, second)
    assert (folder / "big.bin").stat().st_uid == OTHER  # the second account's file, used as it is
    assert f"(another user, uid {OTHER}; lock " in second[2]


def test_a_lock_left_by_a_killed_run_is_taken(slow, folder):
    """kill -9 leaves the lock file (the kernel drops its flock): the next run, another home, takes
    it, resumes the .part and leaves no lock file."""
    target = folder / "big.bin"
    homes = _homes(2)
    try:
        first = _start(slow.url_for("big.bin"), target, homes[0], "--sha256", SHA)
        _until(lambda: (folder / "big.bin.part").exists() and (folder / "big.bin.part").stat().st_size > 0
               or first.poll() is not None)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
        assert (folder / "big.bin.part.lock").exists()
        second = _start(slow.url_for("big.bin"), target, homes[1], "--sha256", SHA)
        out, err = second.communicate(timeout=120)
        assert second.returncode == 0, (out, err)
        assert "waiting for" not in err
        assert hashlib.sha256(target.read_bytes()).hexdigest() == SHA
        assert sorted(p.name for p in folder.iterdir()) == ["big.bin"]
    finally:
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)


def test_clean_from_another_home_leaves_a_running_download_alone(slow, tmp_path):
    """`prefetch clean --older-than 0` of another home saw no lock of its own on a running
    download's .part and removed it (the download then failed); the beside lock says it runs."""
    keras = tmp_path / "keras"
    target = keras / "datasets" / "big.bin"
    homes = _homes(2)
    try:
        first = _start(slow.url_for("big.bin"), target, homes[0], "--sha256", SHA)
        _until(lambda: (target.parent / "big.bin.part").exists() and (target.parent / "big.bin.part").stat().st_size > 0
               or first.poll() is not None)
        assert first.poll() is None
        env = dict(os.environ, PREFETCH_HOME=str(homes[1] / ".prefetch"), HOME=str(homes[1]))
        clean = subprocess.run([sys.executable, "-m", "prefetch", "clean", "--cache-dir", str(keras), "--older-than",
                                "0"], capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
        assert clean.returncode == 0, (clean.stdout, clean.stderr)
        assert "its download is running; left alone" in clean.stdout + clean.stderr, (clean.stdout, clean.stderr)
        out, err = first.communicate(timeout=120)
        assert first.returncode == 0, (out, err)
        assert hashlib.sha256(target.read_bytes()).hexdigest() == SHA
    finally:
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)
