"""A hostile review of job state: races between the commands that follow one job.

Real detached workers downloading from a loopback origin (as tests/test_jobs.py).
"""

from __future__ import annotations

import hashlib
import os

import pytest

from tests.test_jobs import (job_id_from, poll, record, stop_leftover_workers, synth,  # noqa: F401 - fixtures
                             write_synth_registry)


def test_two_resumes_of_one_job_start_one_worker_and_status_stays_true(synth, origin, home, cli, monkeypatch):
    """Two kernels resume one stopped job at once. Both saw it stopped; the second reset the
    record the first worker had just claimed (running -> queued, pid gone) and wrote its own
    worker's pid, a worker that found the run lock held and left. `status` then said
    `interrupted` and `wait` returned 7 while the first worker went on downloading.
    Now the second resume re-checks under the jobs lock and refuses with one line."""
    import prefetch.flow.planning as planning
    from prefetch.errors import UsageError
    from prefetch.jobs import resume_job

    registry, data = synth
    origin.rate = 150_000
    job_id = job_id_from(cli("get", "synth", "--registry", str(registry), "--connections", "1", "-b").stdout)
    poll(lambda: record(job_id).files[0].bytes > 0, what="bytes on disk")
    assert cli("cancel", job_id).returncode == 0
    assert record(job_id).state == "cancelled"

    # The other kernel's resume lands between this resume's check and its reset (while it
    # plans the request again): its worker claims the job first.
    real_plan = planning.plan_request
    first: list[int] = []

    def plan_while_another_resumes(*args, **kwargs):
        if not first:
            other = cli("resume", job_id)
            assert other.returncode == 0, other.stderr
            rec = poll(lambda: (r := record(job_id)).state == "running" and r.pid and r, what="the first worker")
            first.append(rec.pid)
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(planning, "plan_request", plan_while_another_resumes)
    with pytest.raises(UsageError) as refused:
        resume_job(job_id)
    assert "another resume started it" in str(refused.value)

    rec = record(job_id)
    assert rec.state == "running" and rec.pid == first[0], (rec.state, rec.pid, first)
    origin.rate = None
    waited = cli("wait", job_id, timeout=60)
    assert waited.returncode == 0, waited.stderr
    assert hashlib.sha256((home / ".keras" / "datasets" / "synth.bin").read_bytes()).hexdigest() == \
        hashlib.sha256(data).hexdigest()
    assert record(job_id).attempts == 2


def test_a_record_under_another_jobs_name_does_not_clean_away_a_running_job(synth, origin, home, cli):
    """A record file whose id is not its name (planted in a shared state dir, or copied):
    `jobs clean` read jobs/j1126-fake.json saying 'j<running job> done' and removed the
    running job's record, log and run lock; the job vanished from `status` and `wait` while
    its worker went on. Now such a record is corrupt, and only its own files go."""
    import json
    import time

    registry, data = synth
    origin.rate = 150_000
    job_id = job_id_from(cli("get", "synth", "--registry", str(registry), "--connections", "1", "-b").stdout)
    poll(lambda: record(job_id).files[0].bytes > 0, what="bytes on disk")
    jobs = home / ".prefetch" / "state" / "jobs"
    (jobs / "j1126-fake.json").write_text(json.dumps({
        "id": job_id, "command": "get synth", "request": {"names": ["synth"]}, "state": "done",
        "exit_code": 0, "started": time.time(), "updated": time.time(), "files": []}))

    cleaned = cli("jobs", "clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert (jobs / f"{job_id}.json").exists() and (jobs / f"{job_id}.log").exists()
    assert not (jobs / "j1126-fake.json").exists()
    assert record(job_id).state == "running"
    origin.rate = None
    waited = cli("wait", job_id, timeout=60)
    assert waited.returncode == 0, waited.stderr
    assert hashlib.sha256((home / ".keras" / "datasets" / "synth.bin").read_bytes()).hexdigest() == \
        hashlib.sha256(data).hexdigest()


def test_resume_right_after_cancel_while_the_old_worker_still_exits(synth, origin, home, cli):
    """`prefetch cancel J; prefetch resume J` in one cell: cancel returns once the record says
    cancelled, while the old worker is still exiting with the job's run lock. The new worker
    found the lock taken, logged 'another worker runs job' and left: `wait` said 7 and nothing
    was downloaded (seen in about one run in four). Here a process holds the run lock for a
    second past the resume, as that exiting worker does; the new worker waits for it."""
    import subprocess
    import sys

    registry, data = synth
    origin.rate = 150_000
    job_id = job_id_from(cli("get", "synth", "--registry", str(registry), "--connections", "1", "-b").stdout)
    poll(lambda: record(job_id).files[0].bytes > 0, what="bytes on disk")
    assert cli("cancel", job_id).returncode == 0
    origin.rate = None

    run_lock = home / ".prefetch" / "state" / "jobs" / f"{job_id}.run"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"fd = os.open({str(run_lock)!r}, os.O_RDWR)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\nsys.stdin.readline()\ntime.sleep(1.0)\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        resumed = cli("resume", job_id)
        assert resumed.returncode == 0, resumed.stderr
        holder.stdin.write("go\n")
        holder.stdin.flush()
        waited = cli("wait", job_id, timeout=60)
        assert waited.returncode == 0, (waited.stderr, record(job_id).log_path.read_text())
    finally:
        holder.kill()
        holder.wait()
    assert hashlib.sha256((home / ".keras" / "datasets" / "synth.bin").read_bytes()).hexdigest() == \
        hashlib.sha256(data).hexdigest()
