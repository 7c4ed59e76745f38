"""``prefetch cancel`` of a job that finishes while the cancel reaches it: the job stays ``done``
and cancel says so. It said "JOB done; continue with `prefetch resume JOB`", and a resume of
the done job started it again."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.helpers import start_cli
from tests.nginx import NginxServer, nginx_binary
from tests.test_jobs import job_id_from

pytestmark = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")


def test_cancel_of_a_job_that_finishes_meanwhile_says_it_is_done(home, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    data = os.urandom(300_000)
    (www / "a.bin").write_bytes(data)
    # The jobs' test hook holds the worker after its file's ``done`` (as the last steps of a job
    # would): the cancel's SIGTERM ends the pause, and the job ends done.
    env = dict(os.environ, PREFETCH_TEST_PAUSE_AT="done", PREFETCH_TEST_PAUSE_SECONDS="60")
    with NginxServer(www) as nginx:
        launch = start_cli("get", nginx.url_for("a.bin"), "-o", str(tmp_path / "a.bin"), "-b", env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        job = job_id_from(launch.communicate(timeout=60)[0])
        log = home / ".prefetch" / "state" / "jobs" / f"{job}.log"
        deadline = time.monotonic() + 60
        while "test hook: pausing" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, log.read_text() if log.exists() else "no log"
            time.sleep(0.05)
        cancel = subprocess.run([sys.executable, "-m", "prefetch", "cancel", job], capture_output=True, text=True,
                                timeout=60)
    assert cancel.returncode == 0, (cancel.stdout, cancel.stderr)
    assert "resume" not in cancel.stdout, cancel.stdout
    assert cancel.stdout.strip() == f"{job} done: it finished before the cancel reached it; its files are in place"
    assert (tmp_path / "a.bin").read_bytes() == data
