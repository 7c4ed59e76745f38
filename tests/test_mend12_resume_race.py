"""Two `prefetch resume` of one job at once: the one that loses says what is true (the worker
the other started, by pid), never "still queued (pid None)"."""

from __future__ import annotations

import os
import re
import subprocess
import time

from tests.helpers import start_cli
from tests.test_jobs import (job_id_from, poll, record, stop_leftover_workers, synth,  # noqa: F401 - fixtures
                             write_synth_registry)


def _stopped_job(cli, registry, origin) -> str:
    origin.rate = 150_000
    job_id = job_id_from(cli("get", "synth", "--registry", str(registry), "--connections", "1", "-b").stdout)
    poll(lambda: record(job_id).files[0].bytes > 0, what="bytes on disk")
    assert cli("cancel", job_id).returncode == 0
    assert record(job_id).state == "cancelled"
    return job_id


def test_a_resume_that_finds_the_job_being_started_names_no_pid_none(synth, origin, home, cli):
    """The record as the winning resume leaves it between its reset and its worker's pid:
    queued, no pid, attempts + 1 (written as resume_job writes it)."""
    from prefetch.fs.processes import process_start_time
    from prefetch.jobs.records import update_record

    registry, _ = synth
    job_id = _stopped_job(cli, registry, origin)

    def as_the_winner_leaves_it(rec) -> None:
        rec.state, rec.pid, rec.pid_start, rec.exit_code, rec.finished = "queued", None, None, None, None
        rec.updated = time.time()
        rec.attempts += 1
        # (the winning resume, this process, is its launcher: alive, so the job is not yet "never started")
        rec.launcher, rec.launcher_start = os.getpid(), process_start_time(os.getpid())

    update_record(job_id, as_the_winner_leaves_it)
    loser = cli("resume", job_id)
    assert loser.returncode == 2, loser.stderr
    assert "pid None" not in loser.stderr, loser.stderr
    assert f"job {job_id} is being started by another resume (no worker pid yet)" in loser.stderr, loser.stderr
    assert f"`prefetch wait {job_id}` follows it" in loser.stderr


def test_two_resumes_at_once_start_one_worker_and_the_other_names_it(synth, origin, home, cli):
    registry, _ = synth
    for _ in range(3):
        job_id = _stopped_job(cli, registry, origin)
        both = [start_cli("resume", job_id, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
        results = [(p.wait(timeout=60), p.stdout.read(), p.stderr.read()) for p in both]
        for p in both:
            p.stdout.close()
            p.stderr.close()
        codes = sorted(code for code, _, _ in results)
        assert codes == [0, 2], results
        (refusal,) = [err for code, _, err in results if code == 2]
        assert "pid None" not in refusal, refusal
        worker = record(job_id)
        assert worker.active and worker.pid, worker
        shown = re.search(r"\(pid (\d+)\)", refusal)
        assert shown and int(shown.group(1)) == worker.pid, (refusal, worker.pid)
        assert cli("cancel", job_id).returncode == 0
