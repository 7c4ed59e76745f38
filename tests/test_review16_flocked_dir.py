"""A folder another program holds an exclusive ``flock`` on: ``flock /data ./download.sh``, the
shell's way to keep two cron runs of a script apart (``flock(1)`` locks a directory as well as a
file), with ``prefetch get ... -P /data`` inside. The fifteenth sitting's ``fs/made_dirs.py``
holds each folder a run writes into with a shared ``flock`` taken blocking ("waits only while
another run removes it"): under that lock it waited for ever, before any byte, and SIGTERM
(``timeout``, ``prefetch cancel``) did not end it (the ``flock`` call is retried after the
signal); only SIGKILL did. Now a folder held so is waited for briefly, then used without the
hold (the hold only keeps another prefetch run's end from removing the folder, and no run can
remove it while that lock is held). A real second process holds the lock; a real origin."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import run_cli
from tests.helpers import stop_process

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(600)
"""


def test_a_get_into_a_folder_another_program_holds_locked(origin, home, tmp_path):
    data = b"flocked folder\n" * 1000
    origin.put("f.bin", data)
    folder = tmp_path / "data"
    folder.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL)
    try:
        assert holder.stdout.readline().strip() == "held"
        got = run_cli("get", origin.url_for("f.bin"), "-P", str(folder), cwd=tmp_path, timeout=120)
        assert got.returncode == 0, got.stderr
        assert (folder / "f.bin").read_bytes() == data
        assert holder.poll() is None  # (the lock was held throughout)
    finally:
        stop_process(holder)
