"""The jobs dir's lock (``jobs/.lock``): one ``flock``, the lock earlier versions took with filelock.

A ``get -b`` launcher writes its job record under it; a process of an earlier prefetch
(filelock's ``FileLock``, an ``flock`` on Linux) holding it makes the launcher wait, and
the launcher goes on as soon as it is released. A link planted at its name is refused.
"""

from __future__ import annotations

import os
import subprocess
import time

from filelock import FileLock

from prefetch.jobs.records import jobs_dir
from tests.conftest import run_cli
from tests.helpers import start_cli
from tests.origin import OriginServer


def test_a_launcher_waits_while_filelock_holds_the_jobs_lock(home, tmp_path):
    data = os.urandom(20_000)
    out = tmp_path / "j.bin"
    directory = jobs_dir(os.environ)
    directory.mkdir(parents=True)
    theirs = FileLock(str(directory / ".lock"))
    with OriginServer() as origin:
        origin.put("j.bin", data)
        theirs.acquire()
        try:
            launcher = start_cli("get", origin.url_for("j.bin"), "-o", str(out), "-b", "-q",
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(1.5)
            assert launcher.poll() is None, "the launcher went on while the jobs lock was held"
            assert not list(directory.glob("*.json")), "a job record written under someone else's lock"
        finally:
            theirs.release()
        stdout, stderr = launcher.communicate(timeout=60)
        assert launcher.returncode == 0, stderr
        assert b"started job" in stdout
        waited = run_cli("wait", timeout=120)
    assert waited.returncode == 0, waited.stderr
    assert out.read_bytes() == data


def test_a_link_planted_at_the_jobs_lock_is_refused(home, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    directory = jobs_dir(os.environ)
    directory.mkdir(parents=True)
    (directory / ".lock").symlink_to(victim)

    proc = run_cli("get", "http://127.0.0.1:9/x.bin", "-o", str(tmp_path / "x.bin"), "-b")

    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert victim.read_text() == "keep me"
