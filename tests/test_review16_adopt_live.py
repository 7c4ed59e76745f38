"""``--content-disposition`` takes over a ``.part`` an earlier run left under the URL's name
(``flow/served_names.py``, fifteenth sitting). It held only its own home's locks while it moved
the ``.part``: a run of another ``PREFETCH_HOME`` (a second kernel, a job started with another
home) that was downloading that very URL under its own name, holding the lock beside the file,
had its live ``.part`` and state renamed from under it. That run failed with "cannot write
.../777.part: No such file or directory" (exit 5), left its state behind, and both wrote the one
file at once. Now the move also needs both names' locks beside the files (every home's and
user's runs take them): a ``.part`` a live run holds stays its own, and the served-name run
downloads afresh. A real nginx serves the header; the other run is a real prefetch process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.conftest import run_cli
from tests.helpers import stop_process
from tests.test_review15_wait_served import DATA, nginx  # noqa: F401 - the fixture: /files/777 served as big.bin


def test_a_live_download_of_another_home_keeps_its_part(nginx, home, tmp_path):
    url = nginx.url_for("files/777")
    out = tmp_path / "out"
    other = dict(os.environ, PREFETCH_HOME=str(tmp_path / "other-home"))
    slow = subprocess.Popen([sys.executable, "-m", "prefetch", "get", url, "-P", str(out), "--limit-rate", "20k"],
                            env=other, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "777.part.json").exists():  # (its state: the run is under way, holding its lock)
            assert slow.poll() is None and time.monotonic() < deadline, slow.communicate()
            time.sleep(0.05)
        part = os.stat(out / "777.part")

        got = run_cli("get", url, "--content-disposition", "-P", str(out), cwd=tmp_path)
        assert got.returncode == 0, got.stderr
        assert (out / "big.bin").read_bytes() == DATA
        assert "resuming from 777.part" not in got.stderr, got.stderr
        assert slow.poll() is None, slow.communicate()  # (the other run goes on ...)
        still = os.stat(out / "777.part")  # (... writing its own .part, where it was)
        assert (still.st_ino, still.st_dev) == (part.st_ino, part.st_dev)
        assert (out / "777.part.json").exists()
    finally:
        stop_process(slow)
