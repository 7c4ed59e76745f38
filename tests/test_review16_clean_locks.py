"""``prefetch clean`` and the lock files beside files (``<final>.part.lock``, fifteenth sitting)
that a run killed with ``kill -9`` before it made the file's ``.part`` left alone in the cache:
clean removed a lock file only with its ``.part``, so these stayed for ever. It now takes each
such lock and lets it go, which removes it when it is prefetch's (empty, or a holder's record);
one a live process holds, a file of the user's that has the name and a planted link stay. Real
CLI processes; a real second process holds one lock."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys

from tests.conftest import run_cli
from tests.helpers import stop_process

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def test_clean_removes_lock_files_a_killed_run_left(home, keras_datasets, tmp_path):
    keras_datasets.mkdir(parents=True)
    record = {"pid": 999999999, "host": "gone", "started": 1.0, "target": "x", "job": None}
    (keras_datasets / "a.bin.part.lock").write_bytes(b"")
    (keras_datasets / "b.bin.part.lock").write_text(json.dumps(record))
    (keras_datasets / "mine.part.lock").write_text("a file of mine\n")
    (keras_datasets / "link.part.lock").symlink_to(tmp_path / "victim")
    (keras_datasets / "held.part.lock").write_bytes(b"")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(keras_datasets / "held.part.lock")],
                              stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert holder.stdout.readline().strip() == "held"
        got = run_cli("clean", "--json", cwd=tmp_path)
        assert got.returncode == 0, got.stderr
        assert sorted(p.name for p in keras_datasets.iterdir()) == ["held.part.lock", "link.part.lock",
                                                                     "mine.part.lock"]
        removed = {os.path.basename(r["path"]) for r in json.loads(got.stdout)["removed"]}
        assert removed == {"a.bin.part.lock", "b.bin.part.lock"}
        assert (keras_datasets / "mine.part.lock").read_text() == "a file of mine\n"
        assert not os.path.lexists(tmp_path / "victim")
        fd = os.open(keras_datasets / "held.part.lock", os.O_RDONLY)
        try:  # (still the holder's: its lock is on this very file)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                raise AssertionError("the held lock file was replaced")
            except BlockingIOError:
                pass
        finally:
            os.close(fd)
    finally:
        stop_process(holder)
