"""Background jobs: detach a worker, keep its record, report, wait, cancel, resume.

One module per concern (nothing here prints; all return dataclasses or raise
``PrefetchError`` subclasses):

    record_types.py  what a job record holds: the job's and its files' states (dataclasses)
    records.py       where a record lives; reading, checking, writing it (the one loader)
    liveness.py      is the worker still there (pid + start time, run lock): refresh_state
    launch.py        start a detached worker
    shown_command.py the command line a job shows to retype: options, and roots and endpoints set in front
    not_started.py   a worker that could not be started: the record says failed, with why
    cancel_resume.py cancel a job's worker; resume a stopped job (a new worker)
    wait.py          block until jobs/datasets end; their outcome
    housekeeping.py  forget finished jobs; read and follow logs
    views.py         table rows, short repr, HTML (status, notebooks, watch)
    watch.py         ``prefetch.watch()``: the table updated in place
    worker.py        the detached process: ``python -m prefetch.jobs.worker JOB``
    job_progress.py  its event sink: the record rewritten about once a second, the log lines, the end
    out_of_files.py  the worker out of file descriptors: spare ones to record its end (exit 5)

Inside: views <- record_types <- records <- liveness <- wait/launch/housekeeping <- cancel_resume, worker.
May import every layer below it (``flow`` and what ``flow`` may import, and
``operations``); never ``doctor``, ``demo``, the API or the CLI.
"""

from prefetch.model.lazy import lazy_names

# Each name is loaded from its module on first use (PEP 562): the ``get -b`` launcher, a
# process at normal priority in the user's cell, needs records, liveness and launch only.
_LAZY = {
    "CleanResult": "prefetch.jobs.housekeeping",
    "clean_jobs": "prefetch.jobs.housekeeping",
    "iter_log": "prefetch.jobs.housekeeping",
    "cancel_job": "prefetch.jobs.cancel_resume",
    "describe_request": "prefetch.jobs.shown_command",
    "pin_request": "prefetch.jobs.launch",
    "resume_job": "prefetch.jobs.cancel_resume",
    "start_job": "prefetch.jobs.launch",
    "get_job": "prefetch.jobs.liveness",
    "hold_run_lock": "prefetch.jobs.liveness",
    "latest_job": "prefetch.jobs.liveness",
    "list_jobs": "prefetch.jobs.liveness",
    "refresh_state": "prefetch.jobs.liveness",
    "run_lock_held": "prefetch.jobs.liveness",
    "run_lock_path": "prefetch.jobs.liveness",
    "worker_identity_proven": "prefetch.jobs.liveness",
    "ACTIVE_STATES": "prefetch.jobs.record_types",
    "FINAL_FILE_STATES": "prefetch.jobs.record_types",
    "GENERATED_ID_RE": "prefetch.jobs.records",
    "RECORD_SCHEMA": "prefetch.jobs.record_types",
    "STALE_SECONDS": "prefetch.jobs.records",
    "FileStatus": "prefetch.jobs.record_types",
    "JobRecord": "prefetch.jobs.record_types",
    "JobState": "prefetch.jobs.record_types",
    "check_job_id": "prefetch.jobs.records",
    "files_in_place": "prefetch.jobs.record_types",
    "job_to_dict": "prefetch.jobs.records",
    "jobs_dir": "prefetch.jobs.records",
    "load_record": "prefetch.jobs.records",
    "locked_jobs": "prefetch.jobs.records",
    "new_job_id": "prefetch.jobs.records",
    "record_from_dict": "prefetch.jobs.records",
    "record_path": "prefetch.jobs.records",
    "record_to_dict": "prefetch.jobs.records",
    "this_host": "prefetch.jobs.records",
    "update_record": "prefetch.jobs.records",
    "write_record": "prefetch.jobs.records",
    "WaitResult": "prefetch.jobs.wait",
    "dataset_missing": "prefetch.jobs.wait",
    "job_exit_code": "prefetch.jobs.wait",
    "wait_for": "prefetch.jobs.wait",
    "wait_jobs": "prefetch.jobs.wait",
    "is_process_alive": "prefetch.fs.processes",
    "process_start_time": "prefetch.fs.processes",
}


__getattr__, __dir__ = lazy_names("prefetch.jobs", globals(), _LAZY)


__all__ = [
    "ACTIVE_STATES", "FINAL_FILE_STATES", "GENERATED_ID_RE", "RECORD_SCHEMA", "STALE_SECONDS",
    "CleanResult", "FileStatus", "JobRecord", "JobState", "WaitResult",
    "cancel_job", "check_job_id", "clean_jobs", "dataset_missing", "describe_request", "files_in_place",
    "get_job", "hold_run_lock", "is_process_alive", "iter_log", "job_exit_code", "job_to_dict", "jobs_dir", "latest_job",
    "list_jobs", "load_record", "locked_jobs", "new_job_id", "pin_request", "process_start_time",
    "record_from_dict", "record_path", "record_to_dict", "refresh_state", "resume_job", "run_lock_held", "run_lock_path", "start_job",
    "this_host", "update_record", "wait_for", "worker_identity_proven", "wait_jobs", "write_record",
]
