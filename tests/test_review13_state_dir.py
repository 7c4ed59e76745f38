"""The jobs dir that cannot be written (another account's, or a disk that refuses the job's log):
`get -b` and `resume` say one line with exit 5 (docs/exit-codes.md), never a traceback, and leave
no job record that lies (a "queued" job no worker will ever run: `wait` waited on it for a minute,
until liveness called it "interrupted" with exit 7 and `resume` as the advice, the disk never named).

Real processes: the second account is uid 65534 (tests/test_mend12b_second_uid.py's interpreter
and copy of prefetch); the refused log is a real RLIMIT_FSIZE (EFBIG: no mount, no privilege)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.test_jobs import job_id_from
from tests.test_mend12b_second_uid import OTHER, PYTHON, _drop, _one_line_exit_5, other_python  # noqa: F401


def test_a_jobs_dir_another_account_owns_is_one_line_exit_5(other_python, origin, home):  # noqa: F811
    origin.put("f.bin", b"x" * 1000)
    state = Path(tempfile.mkdtemp(prefix="prefetch-state-", dir="/tmp"))
    other_home = Path(tempfile.mkdtemp(prefix="prefetch-other-", dir="/tmp"))
    try:
        os.chmod(state, 0o755)
        (state / "state" / "jobs").mkdir(parents=True)  # root's, 0755: the second account reads it only
        os.chown(other_home, OTHER, OTHER)
        env = dict(os.environ, HOME=str(other_home), PREFETCH_HOME=str(state), XDG_STATE_HOME=str(other_home / "s"),
                   KERAS_HOME=str(other_home / ".keras"), PYTHONPATH=str(other_python), PYTHONDONTWRITEBYTECODE="1")
        done = subprocess.run([PYTHON[0], "-m", "prefetch", "get", origin.url_for("f.bin"), "-o",
                               str(other_home / "f.bin"), "-b"], capture_output=True, text=True, timeout=120, env=env,
                              cwd=str(other_home), stdin=subprocess.DEVNULL, preexec_fn=_drop)
        line = _one_line_exit_5(done)
        assert str(state / "state" / "jobs") in line, line
        assert sorted(p.name for p in (state / "state").rglob("*")) == ["jobs"]  # no record, no crash file
        assert not (other_home / "f.bin").exists()
    finally:
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(other_home, ignore_errors=True)


def test_resuming_another_accounts_job_is_one_line_naming_prefetch_home(other_python, origin, home):  # noqa: F811
    origin.put("f.bin", b"x" * 1000)
    state = Path(tempfile.mkdtemp(prefix="prefetch-state-", dir="/tmp"))
    other_home = Path(tempfile.mkdtemp(prefix="prefetch-other-", dir="/tmp"))
    try:
        os.chmod(state, 0o755)
        mine = dict(os.environ, PREFETCH_HOME=str(state))
        job = job_id_from(run_cli("get", origin.url_for("f.bin"), "-o", str(state / "f.bin"), "-b", env=mine).stdout)
        assert run_cli("wait", job, env=mine).returncode == 0
        before = (state / "state" / "jobs" / f"{job}.json").read_bytes()
        os.chown(other_home, OTHER, OTHER)
        env = dict(os.environ, HOME=str(other_home), PREFETCH_HOME=str(state), XDG_STATE_HOME=str(other_home / "s"),
                   KERAS_HOME=str(other_home / ".keras"), PYTHONPATH=str(other_python), PYTHONDONTWRITEBYTECODE="1")
        done = subprocess.run([PYTHON[0], "-m", "prefetch", "resume", job], capture_output=True, text=True,
                              timeout=120, env=env, cwd=str(other_home), stdin=subprocess.DEVNULL, preexec_fn=_drop)
        line = _one_line_exit_5(done)
        assert "PREFETCH_HOME" in line and "--cache-dir" not in line, line  # (the state dir, not a cache)
        assert (state / "state" / "jobs" / f"{job}.json").read_bytes() == before
    finally:
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(other_home, ignore_errors=True)


def _file_size_limit(limit: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # (Python ignores SIGXFSZ: writes get EFBIG)

    return apply


def test_a_resume_whose_log_cannot_be_written_is_failed_not_queued(origin, home, cli):
    job = job_id_from(cli("get", origin.url_for("missing.bin"), "-o", str(home / "m.bin"), "-b").stdout)
    assert cli("wait", job, timeout=60).returncode == 3
    jobs = home / ".prefetch" / "state" / "jobs"
    with open(jobs / f"{job}.log", "ab") as log:
        log.write(b"an earlier run's lines\n" * 10_000)  # (230 KB: past the limit below; the record is not)
    resumed = subprocess.run([sys.executable, "-m", "prefetch", "resume", job], capture_output=True, text=True,
                             timeout=120, stdin=subprocess.DEVNULL, preexec_fn=_file_size_limit(64 << 10))
    assert resumed.returncode == 5, (resumed.stdout, resumed.stderr)
    assert "Traceback" not in resumed.stderr and "internal error" not in resumed.stderr, resumed.stderr
    assert str(jobs / f"{job}.log") in resumed.stderr, resumed.stderr
    stored = json.loads((jobs / f"{job}.json").read_text())
    assert (stored["state"], stored["exit_code"], stored["pid"]) == ("failed", 5, None), stored
    waited = cli("wait", job, "--timeout", "20", timeout=60)
    assert waited.returncode == 5, (waited.stdout, waited.stderr)  # (the lie: "queued", wait timed out: 1)
    again = run_cli("resume", job)  # no limit now: the job runs again (and fails on its 404 again)
    assert job_id_from(again.stdout) == job, again.stderr
    assert cli("wait", job, timeout=60).returncode == 3
