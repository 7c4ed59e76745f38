"""A worker that writes its end and exits between a reader's look at its record and its look at
the process: the reader takes the end as written, not "stopped without finishing".

A worker ends within a millisecond of its last record (``errors.end_process``). ``prefetch
wait`` of a job that failed with exit 5 (a disk that refused more bytes) said "interrupted
(exit 7): the worker stopped without finishing" once in a CI run: it had read the record while
the job was running and looked at the process after it had gone. ``jobs.get_job`` now reads
the record once more when it finds the worker gone.
"""

from __future__ import annotations

import os
import time

from prefetch.jobs import JobRecord, get_job, load_record, write_record
from prefetch.jobs import liveness
from prefetch.jobs.records import this_host


def test_an_end_written_as_the_worker_goes_is_the_jobs_end(home, monkeypatch):
    job = "j1128-end1"
    running = JobRecord(id=job, command="get x -b", request={"names": ["x"]}, state="running",
                        pid=os.getpid(), pid_start=None, host=this_host(), started=time.time(), updated=time.time())
    write_record(running)
    looks = []

    def worker_ends_now(*args, **kwargs):
        # The worker's last two steps, at the worst moment: its end on disk, then gone.
        if not looks:
            ended = load_record(job)
            ended.state, ended.exit_code, ended.error = "failed", 5, "File too large"
            write_record(ended)
        looks.append(args)
        return False

    # (Without a start time the worker's run lock is the look at its process: free, it is gone.)
    monkeypatch.setattr(liveness, "is_process_alive", worker_ends_now)
    monkeypatch.setattr(liveness, "run_lock_held", worker_ends_now)
    found = get_job(job)
    assert looks, "the reader looked at the worker's process"
    assert (found.state, found.exit_code, found.error) == ("failed", 5, "File too large")
