"""Another account's bulk lane leaves an empty ``.part`` for a run that holds the file's beside lock.

The lane (flow/file_batch.py) makes each ``.part`` with ``O_EXCL``, locks it, and gives the file
up when it then finds the lock beside the file held (``fs.beside_locks.lock_new_part``), leaving
the empty ``.part`` for that run. When that run was another account's, its engine met a
``.part`` it may not write and the file failed, exit 5 ("belongs to another user"); seen once
under load in test_homes15's two-account list. Here the race is made to happen: the second
account (uid 65534) makes and locks the ``.part`` first, as its lane does, and runs the lane's
own ``lock_new_part`` only once root's ``get`` holds the beside lock and waits for that
``.part``. Now (``fs.beside_locks.claim_part``) root removes the empty foreign ``.part`` and
downloads: exit 0, the file in place.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.nginx import NginxServer, nginx_binary
from tests.test_mend12b_second_uid import other_python  # noqa: F401

pytestmark = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")

LANE = """
import fcntl, os, sys, time
from prefetch.fs.beside_locks import _NEW, beside_is_held, lock_new_part
final, go = sys.argv[1], sys.argv[2]
part = final + ".part"
fd = os.open(part, _NEW, 0o644)          # the lane's O_EXCL .part (flow/file_batch.py's _write_part)
fcntl.flock(fd, fcntl.LOCK_EX)           # ... locked: a run's usual path waits for it
print("made", flush=True)
while not os.path.exists(go):
    time.sleep(0.02)
print("held" if beside_is_held(final) else "free", flush=True)
print("kept" if lock_new_part(fd, final, part) else "given up", flush=True)
"""


def test_another_accounts_empty_part_left_by_its_lane_is_replaced(other_python, tmp_path):  # noqa: F811
    from tests.test_mend12b_second_uid import PYTHON, _drop

    root = tmp_path / "www"
    root.mkdir()
    body = os.urandom(300 << 10)
    (root / "f.bin").write_bytes(body)
    team = Path(tempfile.mkdtemp(prefix="prefetch-team18-", dir="/tmp"))
    os.chmod(team, 0o777)  # a team folder, not sticky
    other_home = Path(tempfile.mkdtemp(prefix="prefetch-home18-", dir="/tmp"))
    os.chown(other_home, 65534, 65534)
    home = Path(tempfile.mkdtemp(prefix="prefetch-home18-", dir="/tmp"))
    final = team / "f.bin"
    go = other_home / "go"
    lane = subprocess.Popen([PYTHON[0], "-c", LANE, str(final), str(go)], stdout=subprocess.PIPE, text=True,
                            cwd=str(other_home), stdin=subprocess.DEVNULL, preexec_fn=_drop,
                            env=dict(os.environ, HOME=str(other_home), PYTHONPATH=str(other_python),
                                     PYTHONDONTWRITEBYTECODE="1"))
    run = None
    try:
        assert lane.stdout.readline().strip() == "made"
        assert (team / "f.bin.part").stat().st_uid == 65534
        with NginxServer(root) as server:
            run = subprocess.Popen([sys.executable, "-m", "prefetch", "get", server.url_for("f.bin"), "-o", str(final)],
                                   env=dict(os.environ, PREFETCH_HOME=str(home)), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(home))
            from prefetch.fs.locks import beside_is_held

            end = time.monotonic() + 120
            while not beside_is_held(final):  # root's get holds the lock beside the file (and waits for the .part)
                assert run.poll() is None and time.monotonic() < end, run.communicate()
                time.sleep(0.02)
            go.touch()
            assert lane.stdout.readline().strip() == "held"
            assert lane.stdout.readline().strip() == "given up"  # the lane leaves its empty .part to root's run
            assert lane.wait(timeout=60) == 0
            stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr
        assert "Traceback" not in stderr and "another user" not in stderr
        assert "waiting for another run, which is writing this file's .part" in stderr
        assert final.read_bytes() == body
        assert final.stat().st_uid == 0
        assert sorted(os.listdir(team)) == ["f.bin"]
    finally:
        go.touch()
        lane.kill()
        lane.wait(timeout=30)
        if run is not None and run.poll() is None:
            run.kill()
            run.wait(timeout=30)
        for folder in (team, other_home, home):
            shutil.rmtree(folder, ignore_errors=True)
