"""A ``-b`` job whose worker never starts says so at once, not "queued" for a minute: the
spawn fails (the launcher records the job failed, one line, no traceback), or the launcher
dies between writing the queued record and starting the worker (``status`` sees it gone)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import run_cli


def _jobs(env, cwd) -> list[dict]:
    out = run_cli("status", "--json", env=env, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["jobs"]


def test_a_spawn_that_fails_records_the_job_failed_at_once(home, tmp_path):
    # 30000 relative PYTHONPATH entries are made absolute for the worker (it starts in the jobs
    # folder): an environment past the kernel's limit for one string, E2BIG from the spawn.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(["x"] * 30000))
    started = run_cli("get", "http://127.0.0.1:9/never.bin", "-b", env=env, cwd=tmp_path)
    assert started.returncode == 1, started.stderr
    (line,) = started.stderr.splitlines()
    assert line.startswith("prefetch: error: job ") and "not started" in line and "Traceback" not in line, line
    assert "internal error" not in line, line
    env.pop("PYTHONPATH")
    (job,) = _jobs(env, tmp_path)
    assert job["state"] == "failed" and job["exit_code"] == 1, job
    assert "could not be started" in job["error"], job
    assert [f["state"] for f in job["files"]] == ["failed"]
    waited = run_cli("wait", env=env, cwd=tmp_path, timeout=30)
    assert waited.returncode == 1 and "failed" in waited.stdout, waited.stdout + waited.stderr


def test_a_launcher_killed_before_the_worker_starts_leaves_no_queued_job(home, tmp_path):
    # The launcher dies right where it would start the worker (its queued record written).
    code = ("import os, sys\n"
            "import prefetch.jobs.launch as launch\n"
            "launch._start_worker = lambda *a, **k: os.kill(os.getpid(), 9)\n"
            "from prefetch.cli import main\n"
            "sys.argv = ['prefetch', 'get', 'http://127.0.0.1:9/never.bin', '-b']\n"
            "main()\n")
    killed = subprocess.run([sys.executable, "-c", code], env=os.environ.copy(), cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert killed.returncode == -9, killed.stderr
    (job,) = _jobs(os.environ.copy(), tmp_path)
    assert job["state"] == "interrupted" and job["pid"] is None, job
    assert "never started" in job["error"] and f"prefetch resume {job['id']}" in job["error"], job
    waited = run_cli("wait", env=os.environ.copy(), cwd=tmp_path, timeout=30)
    assert waited.returncode == 7, waited.stdout + waited.stderr
