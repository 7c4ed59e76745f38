"""Background jobs: detach a worker, keep its record, report, wait, cancel, resume.

One module per concern (nothing here prints; all return dataclasses or raise
``PrefetchError`` subclasses):

    records.py       what a job record holds; reading, checking, writing it (the one loader)
    liveness.py      is the worker still there (pid + start time, run lock): refresh_state
    launch.py        start a detached worker; cancel and resume
    wait.py          block until jobs/datasets end; their outcome
    housekeeping.py  forget finished jobs; read and follow logs
    views.py         table rows, short repr, HTML (status, notebooks, watch)
    watch.py         ``prefetch.watch()``: the table updated in place
    worker.py        the detached process: ``python -m prefetch.jobs.worker JOB``

Inside: views <- records <- liveness <- wait/launch/housekeeping <- worker.
May import every layer below it (``flow`` and what ``flow`` may import, and
``operations``); never ``doctor``, ``demo``, the API or the CLI.
"""

from prefetch.jobs.housekeeping import CleanResult, clean_jobs, iter_log
from prefetch.jobs.launch import cancel_job, describe_request, pin_request, resume_job, start_job
from prefetch.jobs.liveness import (
    get_job,
    hold_run_lock,
    latest_job,
    list_jobs,
    refresh_state,
    run_lock_held,
    run_lock_path,
    worker_identity_proven,
)
from prefetch.fs.processes import is_process_alive, process_start_time
from prefetch.jobs.records import (
    ACTIVE_STATES,
    FINAL_FILE_STATES,
    GENERATED_ID_RE,
    RECORD_SCHEMA,
    STALE_SECONDS,
    FileStatus,
    JobRecord,
    JobState,
    check_job_id,
    files_in_place,
    job_to_dict,
    jobs_dir,
    load_record,
    locked_jobs,
    new_job_id,
    record_from_dict,
    record_path,
    record_to_dict,
    this_host,
    update_record,
    write_record,
)
from prefetch.jobs.wait import WaitResult, dataset_missing, job_exit_code, wait_for, wait_jobs

__all__ = [
    "ACTIVE_STATES", "FINAL_FILE_STATES", "GENERATED_ID_RE", "RECORD_SCHEMA", "STALE_SECONDS",
    "CleanResult", "FileStatus", "JobRecord", "JobState", "WaitResult",
    "cancel_job", "check_job_id", "clean_jobs", "dataset_missing", "describe_request", "files_in_place",
    "get_job", "hold_run_lock", "is_process_alive", "iter_log", "job_exit_code", "job_to_dict", "jobs_dir", "latest_job",
    "list_jobs", "load_record", "locked_jobs", "new_job_id", "pin_request", "process_start_time",
    "record_from_dict", "record_path", "record_to_dict", "refresh_state", "resume_job", "run_lock_held", "run_lock_path", "start_job",
    "this_host", "update_record", "wait_for", "worker_identity_proven", "wait_jobs", "write_record",
]
