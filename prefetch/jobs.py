"""Background jobs: detach a worker, keep its record, report, wait, cancel, resume.

A job is one ``get`` request run by a detached worker process
(``python -m prefetch.worker JOB``). Its record, ``<state dir>/jobs/<id>.json``,
is rewritten atomically (temp file + rename, under ``jobs/.lock``) about once a
second by the worker; its log, ``<state dir>/jobs/<id>.log``, gets plain lines.
Readers never trust a "running" record blindly: when the worker's pid is gone
(or now belongs to another process, told apart by its start time in
``/proc/<pid>/stat``), the job is reported as ``interrupted`` and can be resumed.

Nothing here prints; every function returns dataclasses or raises
``PrefetchError`` subclasses.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path

from prefetch.errors import ExitCode, JobNotFoundError, UsageError, WaitTimeoutError
from prefetch.fsutil import replace_file
from prefetch.paths import state_dir


def this_host() -> str:
    """This machine's name, as job records store it (``host``)."""
    return os.uname().nodename


RECORD_SCHEMA = 1
STALE_SECONDS = 120.0  # a running record not rewritten for this long, on another host, is stale
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_GENERATED_ID_RE = re.compile(r"^j\d{4}-[0-9a-f]{4,}$")


class JobState(str, Enum):
    """The state of a job (``corrupt``: its record cannot be read)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    CORRUPT = "corrupt"


ACTIVE_STATES = frozenset({JobState.QUEUED.value, JobState.RUNNING.value})
# File states that mean "this file will not move any more".
FINAL_FILE_STATES = frozenset({"done", "cached", "failed", "interrupted", "cancelled"})


@dataclass
class FileStatus:
    """One file of a job, as the worker last reported it."""

    name: str
    dataset: str
    path: str
    state: str = "pending"  # pending waiting downloading verified extracting done cached failed interrupted
    bytes: int = 0
    total: int | None = None
    rate: float = 0.0  # smoothed bytes/second
    eta: float | None = None  # seconds
    exit_code: int | None = None
    error: str | None = None

    @property
    def percent(self) -> float | None:
        if not self.total:
            return 100.0 if self.state in ("done", "cached") else None
        return min(100.0, 100.0 * self.bytes / self.total)


@dataclass
class JobRecord:
    """A job as stored in ``jobs/<id>.json`` (see ``job_to_dict`` for the public schema)."""

    id: str
    command: str
    request: dict
    files: list[FileStatus] = field(default_factory=list)
    state: str = JobState.QUEUED.value
    pid: int | None = None
    pid_start: int | None = None  # process start time (clock ticks since boot) to detect pid reuse
    host: str = ""
    started: float = 0.0  # epoch seconds
    updated: float = 0.0
    finished: float | None = None
    exit_code: int | None = None
    error: str | None = None
    log: str = ""
    fail_fast: bool = False
    attempts: int = 1
    cancel_requested: bool = False
    schema: int = RECORD_SCHEMA

    @property
    def log_path(self) -> Path:
        return Path(self.log)

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    @property
    def total(self) -> int | None:
        totals = [f.total for f in self.files]
        if not totals or any(t is None for t in totals):
            return None
        return sum(totals)  # type: ignore[arg-type]

    @property
    def rate(self) -> float:
        return sum(f.rate for f in self.files if f.state == "downloading")

    @property
    def datasets(self) -> list[str]:
        return list(dict.fromkeys(f.dataset for f in self.files))


@dataclass
class CleanResult:
    """What ``clean_jobs`` removed and kept."""

    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


@dataclass
class WaitResult:
    """The outcome of ``wait_for``: the jobs waited for and the overall exit code."""

    jobs: list[JobRecord]
    exit_code: int
    failures: list[str] = field(default_factory=list)  # one line per failed job or dataset
    datasets: list[str] = field(default_factory=list)  # dataset names found complete
    missing: list[str] = field(default_factory=list)  # datasets not in place that no job fetched
    superseded: list[str] = field(default_factory=list)  # stopped jobs whose files are in place anyway


# -- paths and ids -------------------------------------------------------------------
def jobs_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where job records and logs live: ``<state dir>/jobs``."""
    return state_dir(env) / "jobs"


def check_job_id(job_id: str) -> str:
    """Return ``job_id`` if it is a safe job id.

    Raises:
        UsageError: it has path characters or is empty/too long.
    """
    if not isinstance(job_id, str) or not _ID_RE.match(job_id):
        raise UsageError(
            f"invalid job id {job_id!r}: expected letters, digits, '-' or '_' (like j0518-a3f9); "
            f"`prefetch status` lists jobs"
        )
    return job_id


def new_job_id(directory: Path) -> str:
    """A short, unused id: ``j`` + month and day + random hex (``j0518-a3f9``)."""
    day = time.strftime("%m%d", time.gmtime())
    for length in (4, 4, 4, 6, 6, 8):
        candidate = f"j{day}-{os.urandom(length // 2).hex()}"
        if not (directory / f"{candidate}.json").exists():
            return candidate
    return f"j{day}-{os.urandom(8).hex()}"


def record_path(job_id: str, env: Mapping[str, str] | None = None) -> Path:
    return jobs_dir(env) / f"{check_job_id(job_id)}.json"


# -- reading and writing records -----------------------------------------------------
def record_from_dict(data: Mapping) -> JobRecord:
    """Build a record from its JSON form (raises ValueError/TypeError/KeyError if malformed)."""
    if not isinstance(data, Mapping):
        raise TypeError("not a JSON object")
    known = set(JobRecord.__dataclass_fields__)
    fields = {k: v for k, v in data.items() if k in known}
    file_keys = set(FileStatus.__dataclass_fields__)
    fields["files"] = [FileStatus(**{k: v for k, v in f.items() if k in file_keys}) for f in data.get("files", [])]
    record = JobRecord(**fields)
    if not isinstance(record.id, str) or not isinstance(record.request, dict):
        raise TypeError("bad id or request")
    JobState(record.state)  # raises ValueError for an unknown state
    return record


def record_to_dict(record: JobRecord) -> dict:
    data = asdict(record)
    data["state"] = JobState(record.state).value
    return data


def write_record(record: JobRecord, env: Mapping[str, str] | None = None) -> None:
    """Write ``record`` atomically (temp file, fsync, rename); callers hold ``locked_jobs``."""
    path = record_path(record.id, env)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(record_to_dict(record), indent=1)
    replace_file(path, data.encode("utf-8"), durable=True)


def load_record(job_id: str, env: Mapping[str, str] | None = None) -> JobRecord:
    """The stored record as written (no liveness check).

    Raises:
        UsageError: bad id. JobNotFoundError: no such job.
        ValueError: the file is corrupt (callers turn that into a ``corrupt`` record).
    """
    path = record_path(job_id, env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise JobNotFoundError(f"no job {job_id!r} in {path.parent}; `prefetch status` lists jobs") from None
    try:
        return record_from_dict(json.loads(text))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"job file {path} is corrupt ({exc.__class__.__name__}: {exc})") from None


@contextmanager
def locked_jobs(env: Mapping[str, str] | None = None) -> Iterator[Path]:
    """Hold ``jobs/.lock`` so read-modify-write updates of records do not interleave."""
    from filelock import FileLock

    directory = jobs_dir(env)
    directory.mkdir(parents=True, exist_ok=True)
    with FileLock(str(directory / ".lock"), timeout=60):
        yield directory


def update_record(
    job_id: str, change: Callable[[JobRecord], None], env: Mapping[str, str] | None = None
) -> JobRecord:
    """Read, ``change`` in place and write back a record, under the jobs lock."""
    with locked_jobs(env):
        record = load_record(job_id, env)
        change(record)
        record.updated = time.time()
        write_record(record, env)
        return record


def _corrupt_record(path: Path, message: str) -> JobRecord:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        mtime = 0.0
    log = path.with_suffix(".log")
    return JobRecord(
        id=path.stem,
        command="?",
        request={},
        state=JobState.CORRUPT.value,
        started=mtime,
        updated=mtime,
        error=message,
        log=str(log) if log.exists() else "",
        exit_code=int(ExitCode.FAILURE),
    )


# -- liveness ------------------------------------------------------------------------
def process_start_time(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot) from /proc; None if unknown."""
    info = _proc_stat(pid)
    return info[1] if info else None


def _proc_stat(pid: int) -> tuple[str, int] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    rest = text[text.rfind(")") + 2 :].split()
    try:
        return rest[0], int(rest[19])  # field 3 state, field 22 starttime
    except (IndexError, ValueError):
        return None


def is_process_alive(pid: int | None, start: int | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if ``start`` is given, is the same process."""
    if not pid or pid <= 0:
        return False
    if Path("/proc/self/stat").exists():
        info = _proc_stat(pid)
        if info is None:
            return False
        state, started = info
        if state in ("Z", "X", "x"):
            return False
        return start is None or started == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def refresh_state(record: JobRecord, *, now: float | None = None) -> JobRecord:
    """Return ``record`` with its state corrected when its worker is gone.

    A queued or running job whose worker process no longer exists becomes
    ``interrupted`` (or ``cancelled`` when a cancel was asked for); its files
    still in flight become ``interrupted`` too. For jobs on other hosts (a shared
    state dir) only a record not rewritten for ``STALE_SECONDS`` counts as gone.
    """
    if not record.active:
        return record
    now = time.time() if now is None else now
    if record.host and record.host != this_host():
        # Another machine sharing the state dir: its pids mean nothing here, but a
        # live worker rewrites its record at least every 20 s (worker.HEARTBEAT_SECONDS).
        if now - record.updated < STALE_SECONDS:
            return record
        return _mark_stopped(record)
    if record.pid is None:
        # The launcher writes the pid right after starting the worker; a record
        # without one for long means the launcher died before that.
        if now - (record.updated or record.started) < 60:
            return record
        alive = False
    else:
        alive = is_process_alive(record.pid, record.pid_start)
    if alive:
        return record
    return _mark_stopped(record)


def _mark_stopped(record: JobRecord) -> JobRecord:
    state = JobState.CANCELLED if record.cancel_requested else JobState.INTERRUPTED
    record.state = state.value
    record.exit_code = int(ExitCode.INTERRUPTED)
    if not record.error:
        record.error = (
            f"the worker (pid {record.pid}) stopped without finishing; "
            f"`prefetch resume {record.id}` continues from the bytes on disk"
        )
    for f in record.files:
        if f.state not in FINAL_FILE_STATES:
            f.state = state.value
            f.rate = 0.0
            f.eta = None
    return record


# -- listing -------------------------------------------------------------------------
def get_job(job_id: str, env: Mapping[str, str] | None = None) -> JobRecord:
    """One job with its current state (a corrupt record comes back with state ``corrupt``).

    Raises:
        UsageError: bad id. JobNotFoundError: no such job.
    """
    try:
        return refresh_state(load_record(job_id, env))
    except ValueError as exc:
        return _corrupt_record(record_path(job_id, env), str(exc))


def list_jobs(env: Mapping[str, str] | None = None) -> list[JobRecord]:
    """Every job with its current state, oldest first."""
    directory = jobs_dir(env)
    if not directory.is_dir():
        return []
    records = []
    for path in directory.glob("*.json"):
        if not _ID_RE.match(path.stem):
            continue
        try:
            records.append(get_job(path.stem, env))
        except JobNotFoundError:
            continue  # removed meanwhile
    records.sort(key=lambda r: (r.started, r.id))
    return records


def latest_job(env: Mapping[str, str] | None = None) -> JobRecord | None:
    jobs = list_jobs(env)
    return jobs[-1] if jobs else None


# -- starting ------------------------------------------------------------------------
def describe_request(request) -> str:
    """The ``prefetch get`` command line equivalent to ``request``."""
    import shlex  # only when starting a job: `prefetch status` starts faster without it

    parts = ["prefetch", "get", *request.names]
    if request.cache_dir:
        parts += ["--cache-dir", request.cache_dir]
    for m in request.mirrors:
        parts += ["--mirror", m]
    if request.also_origin:
        parts.append("--also-origin")
    if request.connections:
        parts += ["--connections", str(request.connections)]
    if request.sha256:
        parts += ["--sha256", request.sha256]
    if request.md5:
        parts += ["--md5", request.md5]
    if request.output:
        parts += ["-o", request.output]
    for r in request.registries:
        parts += ["--registry", r]
    for pattern in getattr(request, "include", []):
        parts += ["--include", pattern]
    for pattern in getattr(request, "exclude", []):
        parts += ["--exclude", pattern]
    if request.fail_fast:
        parts.append("--fail-fast")
    return shlex.join(parts) + " -b"


def pin_request(request, env: Mapping[str, str] | None = None):
    """Make a request independent of the current directory and environment.

    A job may be resumed from another directory or a fresh shell: relative paths
    become absolute, the Keras root and the default dataset mirror are fixed now.
    """
    from dataclasses import replace

    from prefetch.layout import keras_root

    env = os.environ if env is None else env
    return replace(
        request,
        cache_dir=str(keras_root(cache_dir=request.cache_dir, env=env).absolute()),
        mirrors=_pin_mirrors(request, env),
        output=str(Path(request.output).expanduser().absolute()) if request.output else None,
        registries=[str(Path(r).expanduser().absolute()) for r in request.registries],
        hub_cache=_pin_hub_cache(request, env),
    )


def _pin_mirrors(request, env: Mapping[str, str]) -> list[str]:
    """``--mirror``, else ``PREFETCH_DATASET_MIRROR``: a dataset mirror, never taken for an hf:// endpoint."""
    from prefetch.hf.names import is_hub_name
    from prefetch.request import requested_mirrors

    if request.names and all(is_hub_name(n) for n in request.names):
        return list(request.mirrors)
    return requested_mirrors(request, env)


def _pin_hub_cache(request, env: Mapping[str, str]) -> str | None:
    """The Hugging Face cache root, fixed now for a request with hf:// names (HF_HUB_CACHE, HF_HOME...)."""
    from prefetch.hf.names import hub_cache_root, is_hub_name

    if request.hub_cache or not any(is_hub_name(n) for n in request.names):
        return request.hub_cache
    return str(hub_cache_root(env).absolute())


def start_job(
    request,
    *,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
) -> JobRecord:
    """Plan ``request`` (usage errors now), write its record and detach a worker.

    Returns at once with the record (``id``, ``pid``, ``log_path``); the worker
    carries on after this process, and its shell, exit.

    Raises:
        UsageError (and subclasses): the request is wrong (nothing was started).
        LocalFileError: the state dir cannot be written.
    """
    from prefetch.request import plan_request

    env = dict(os.environ if env is None else env)
    request = pin_request(request, env)
    plans, _ = plan_request(request, env=env)
    directory = jobs_dir(env).absolute()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from prefetch.errors import LocalFileError

        raise LocalFileError(f"cannot create the jobs directory {directory}: {exc.strerror}") from None
    with locked_jobs(env):
        job_id = new_job_id(directory)
        request.job = job_id
        now = time.time()
        record = JobRecord(
            id=job_id,
            command=describe_request(request),
            request=request.to_dict(),
            files=[FileStatus(name=p.label, dataset=p.dataset, path=str(p.final)) for p in plans],
            host=this_host(),
            started=now,
            updated=now,
            log=str(directory / f"{job_id}.log"),
            fail_fast=bool(request.fail_fast),
        )
        write_record(record, env)
    return _launch(record, env=env, python=python, note="queued")


def _launch(record: JobRecord, *, env: Mapping[str, str], python: str | None, note: str) -> JobRecord:
    """Start the detached worker for ``record`` and store its pid."""
    log_path = record.log_path
    env = dict(env)
    for var in ("PREFETCH_HOME", "KERAS_HOME"):  # the worker runs in the jobs dir
        if env.get(var):
            env[var] = str(Path(env[var]).expanduser().absolute())
    with open(log_path, "ab") as log:
        from prefetch.render import timestamp

        log.write(f"{timestamp()} job {record.id} {note}: {record.command}\n".encode())
        log.flush()
        # A new session and no stdio left on the caller's terminal: the worker
        # survives a notebook cell's shell exiting under its pty (no & or nohup).
        import subprocess

        proc = subprocess.Popen(
            [python or sys.executable, "-m", "prefetch.worker", record.id],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            close_fds=True,
            start_new_session=True,
            env=env,
            cwd=str(log_path.parent),  # not the caller's directory: it may go away
        )
    pid_start = process_start_time(proc.pid)
    # The worker sets the same pid itself; whichever write comes second keeps it.
    _forget_child(proc)

    def set_pid(rec: JobRecord) -> None:
        if rec.pid is None:
            rec.pid = proc.pid
            rec.pid_start = pid_start

    return update_record(record.id, set_pid, env)


def _forget_child(proc) -> None:
    # The launcher never waits for the worker, but in a long-lived process (the
    # Python API in a notebook kernel) an unreaped worker would linger as a
    # zombie: reap it from a daemon thread. (Liveness checks treat zombies as dead.)
    import threading

    threading.Thread(target=proc.wait, name=f"prefetch-reap-{proc.pid}", daemon=True).start()


# -- cancel and resume ---------------------------------------------------------------
def cancel_job(job_id: str, *, timeout: float = 30.0, env: Mapping[str, str] | None = None) -> JobRecord:
    """Ask a running job to stop (SIGTERM) and wait until it has saved its state.

    Returns the record; a job that is not running is returned unchanged.

    Raises:
        JobNotFoundError, UsageError: unknown or invalid id.
        WaitTimeoutError: the worker did not stop within ``timeout`` seconds.
    """
    import signal

    record = get_job(job_id, env)
    if not record.active:
        return record

    def ask(rec: JobRecord) -> None:
        rec.cancel_requested = True
        if rec.pid is None:  # the worker has not started yet: it will see this and stop
            rec.state = JobState.CANCELLED.value
            rec.exit_code = int(ExitCode.INTERRUPTED)
            rec.finished = time.time()

    record = update_record(job_id, ask, env)
    if record.pid is not None and is_process_alive(record.pid, record.pid_start):
        try:
            os.kill(record.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while True:
        record = get_job(job_id, env)
        if not record.active:
            return record
        if time.monotonic() >= deadline:
            raise WaitTimeoutError(
                f"job {job_id} (pid {record.pid}) did not stop within {timeout:.0f}s after SIGTERM; "
                f"it may be finishing an extraction. Check `prefetch status {job_id}`"
            )
        time.sleep(0.1)


def resume_job(job_id: str, *, env: Mapping[str, str] | None = None, python: str | None = None) -> JobRecord:
    """Start a new worker for a stopped job; it reuses the bytes already on disk.

    Raises:
        JobNotFoundError, UsageError: unknown id, corrupt record, or still running.
    """
    from prefetch.request import GetRequest, plan_request

    env = dict(os.environ if env is None else env)
    record = get_job(job_id, env)
    if record.state == JobState.CORRUPT.value:
        raise UsageError(f"cannot resume {job_id}: {record.error}; start again with `prefetch get NAME -b`")
    if record.active:
        raise UsageError(
            f"job {job_id} is still {record.state} (pid {record.pid}); "
            f"`prefetch wait {job_id}`, or `prefetch cancel {job_id}` first"
        )
    request = GetRequest.from_dict(record.request)
    request.job = job_id
    plan_request(request, env=env)  # the registry may have changed since: fail now, not in the worker

    def reset(rec: JobRecord) -> None:
        rec.state = JobState.QUEUED.value
        rec.pid = None
        rec.pid_start = None
        rec.host = this_host()
        rec.exit_code = None
        rec.error = None
        rec.finished = None
        rec.cancel_requested = False
        rec.attempts += 1
        for f in rec.files:
            if f.state not in ("done", "cached"):
                f.state = "pending"
                f.rate = 0.0
                f.eta = None
                f.exit_code = None
                f.error = None

    record = update_record(job_id, reset, env)
    return _launch(record, env=env, python=python, note=f"resumed (attempt {record.attempts})")


# -- clean ---------------------------------------------------------------------------
def clean_jobs(*, include_interrupted: bool = False, env: Mapping[str, str] | None = None) -> CleanResult:
    """Forget finished jobs: remove their records and logs.

    Removes done, failed, cancelled and corrupt jobs, and interrupted ones whose
    files are all in place anyway; every interrupted one with
    ``include_interrupted`` (they could still be resumed). Running jobs are kept.
    """
    result = CleanResult()
    directory = jobs_dir(env)
    if not directory.is_dir():
        return result
    removable = {JobState.DONE.value, JobState.FAILED.value, JobState.CANCELLED.value, JobState.CORRUPT.value}
    if include_interrupted:
        removable.add(JobState.INTERRUPTED.value)
    with locked_jobs(env):
        for record in list_jobs(env):
            finished_anyway = record.state == JobState.INTERRUPTED.value and files_in_place(record)
            if record.state in removable or finished_anyway:
                for path in (directory / f"{record.id}.json", directory / f"{record.id}.log"):
                    try:
                        path.unlink()
                    except FileNotFoundError:
                        pass
                result.removed.append(record.id)
            else:
                result.kept.append(record.id)
        # Records are only written under this lock, so a temp file here is one
        # left by a writer killed mid-write.
        for tmp in directory.glob(".*.tmp"):
            try:
                tmp.unlink()
            except OSError:
                pass
    return result


# -- wait ----------------------------------------------------------------------------
def job_exit_code(record: JobRecord) -> int:
    """0 for a done job, else its exit code (1 when unknown)."""
    if record.state == JobState.DONE.value:
        return 0
    return int(record.exit_code) if record.exit_code else int(ExitCode.FAILURE)


def wait_jobs(
    job_ids: Sequence[str],
    *,
    timeout: float | None = None,
    poll: float = 0.25,
    on_poll: Callable[[list[JobRecord]], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[JobRecord]:
    """Block until none of ``job_ids`` is queued or running; their final records.

    Raises:
        WaitTimeoutError: ``timeout`` seconds passed first.
        JobNotFoundError, UsageError: unknown or invalid id.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        records = [get_job(j, env) for j in job_ids]
        if on_poll is not None:
            on_poll(records)
        running = [r for r in records if r.active]
        if not running:
            return records
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeoutError(
                f"timed out after {timeout:g}s waiting for {', '.join(r.id for r in running)} "
                f"({_progress_text(running)}); they keep running: wait again or `prefetch status`"
            )
        left = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
        time.sleep(left)


def _progress_text(records: Sequence[JobRecord]) -> str:
    done = sum(r.bytes for r in records)
    totals = [r.total for r in records]
    if totals and all(t for t in totals):
        return f"{100.0 * done / sum(totals):.1f}% done"  # type: ignore[arg-type]
    return f"{done} bytes so far"


def wait_for(
    targets: Sequence[str] | None = None,
    *,
    timeout: float | None = None,
    poll: float = 0.25,
    on_poll: Callable[[list[JobRecord]], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> WaitResult:
    """Wait for jobs and/or datasets; the overall result (never raises for a failed job).

    ``targets`` are job ids or dataset names (a dataset waits for every job
    that includes it, then checks its files are in place). None: every job on
    record (``prefetch jobs clean`` forgets finished ones); a stopped job whose
    files have all been put in place since (by another get) counts as done.

    Raises:
        WaitTimeoutError: ``timeout`` passed first. JobNotFoundError: an unknown job id.
        UnknownDatasetError: a name that is neither a job nor a known dataset.
    """
    env = dict(os.environ if env is None else env)
    all_jobs = list_jobs(env)
    by_id = {r.id: r for r in all_jobs}
    job_ids: list[str] = []
    datasets: list[str] = []
    if targets is None:
        job_ids = [r.id for r in all_jobs]
    else:
        for target in targets:
            if target in by_id:
                job_ids.append(target)
            elif _GENERATED_ID_RE.match(target):
                raise JobNotFoundError(f"no job {target!r}; `prefetch status` lists jobs")
            else:
                datasets.append(target)
    # A dataset waits for every job that includes it.
    for name in datasets:
        for r in all_jobs:
            if _job_mentions(r, name) and r.id not in job_ids:
                job_ids.append(r.id)
    records = wait_jobs(job_ids, timeout=timeout, poll=poll, on_poll=on_poll, env=env) if job_ids else []
    failures: list[str] = []
    exit_code = 0
    explicit = [r for r in records if targets is None or r.id in targets]
    superseded: list[str] = []
    for r in explicit:
        code = job_exit_code(r)
        if code and targets is None and files_in_place(r):
            # Stopped, but a later get or job has put every file in place since.
            superseded.append(r.id)
            continue
        if code:
            failures.append(_failure_line(r))
            exit_code = exit_code or code
    complete: list[str] = []
    missing_names: list[str] = []
    for name in datasets:
        covering = [r for r in records if _job_mentions(r, name)]
        missing = dataset_missing(name, covering, env=env)
        if not missing:
            complete.append(name)
            continue
        latest = covering[-1] if covering else None
        if latest is not None and job_exit_code(latest):
            failures.append(_failure_line(latest))
            exit_code = exit_code or job_exit_code(latest)
        else:
            missing_names.append(name)
            failures.append(
                f"{name}: not in place ({missing}) and no job is fetching it; run `prefetch get {name}`"
            )
            exit_code = exit_code or int(ExitCode.FAILURE)
    return WaitResult(
        jobs=records,
        exit_code=exit_code,
        failures=failures,
        datasets=complete,
        missing=missing_names,
        superseded=superseded,
    )


def files_in_place(record: JobRecord) -> bool:
    """True when every file of ``record`` is at its final path (only ever complete and verified)."""
    return bool(record.files) and all(Path(f.path).exists() for f in record.files)


def _job_mentions(record: JobRecord, name: str) -> bool:
    from prefetch.registry import is_url, normalize_name

    names = record.request.get("names", [])
    if name in names:
        return True
    if is_url(name):
        return False
    key = normalize_name(name)
    return any(key == normalize_name(str(n)) for n in names) or any(key == normalize_name(f.dataset) for f in record.files)


def dataset_missing(name: str, jobs: Sequence[JobRecord] = (), *, env: Mapping[str, str] | None = None) -> str | None:
    """None when every file of dataset ``name`` is in place, else what is missing.

    Uses the request of the latest job that includes ``name`` (its registry files
    and Keras root), else the default registry and root.

    Raises:
        UnknownDatasetError: no registry knows ``name``.
    """
    from prefetch.request import GetRequest, plan_request

    base = jobs[-1].request if jobs else {}
    request = GetRequest(
        names=[name],
        cache_dir=base.get("cache_dir"),
        registries=list(base.get("registries") or []),
    )
    plans, _ = plan_request(request, env=env)
    for plan in plans:
        for path in [*plan.paths, *plan.extract_into]:
            if not path.exists():
                return str(path)
    return None


def _failure_line(record: JobRecord) -> str:
    detail = record.error or ""
    failed = [f for f in record.files if f.error]
    if failed:
        detail = "; ".join(f.error for f in failed if f.error)
    if record.state == JobState.INTERRUPTED.value:
        detail = f"{detail} (resume with `prefetch resume {record.id}`)".strip()
    return f"job {record.id} {record.state} (exit {job_exit_code(record)}): {detail}".rstrip(": ")


# -- the public JSON form ------------------------------------------------------------
def job_to_dict(record: JobRecord) -> dict:
    """The ``status --json`` form of one job (schema documented in commands/jobs.py)."""
    return {
        "id": record.id,
        "state": record.state,
        "exit_code": record.exit_code,
        "error": record.error,
        "command": record.command,
        "names": list(record.request.get("names", [])),
        "pid": record.pid,
        "host": record.host,
        "started": record.started,
        "updated": record.updated,
        "finished": record.finished,
        "attempts": record.attempts,
        "fail_fast": record.fail_fast,
        "log": record.log,
        "bytes": record.bytes,
        "total": record.total,
        "rate": record.rate,
        "files": [
            {
                "name": f.name,
                "dataset": f.dataset,
                "path": f.path,
                "state": f.state,
                "bytes": f.bytes,
                "total": f.total,
                "percent": None if f.percent is None else round(f.percent, 1),
                "rate": f.rate,
                "eta": f.eta,
                "exit_code": f.exit_code,
                "error": f.error,
            }
            for f in record.files
        ],
    }


# -- logs ----------------------------------------------------------------------------
def iter_log(
    job_id: str,
    *,
    follow: bool = False,
    poll: float = 0.25,
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """The text of a job's log in chunks; with ``follow``, keep reading until the job ends."""
    record = get_job(job_id, env)
    path = record.log_path if record.log else jobs_dir(env) / f"{job_id}.log"
    position = 0
    pending = b""
    while True:
        finished = not follow or not get_job(job_id, env).active
        try:
            with open(path, "rb") as fh:
                fh.seek(position)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        if data:
            position += len(data)
            data = pending + data
            # Hand out whole lines only, so a reader never sees half a line.
            cut = data.rfind(b"\n") + 1
            if finished:
                cut = len(data)
            pending = data[cut:]
            if cut:
                yield data[:cut].decode("utf-8", errors="replace")
        elif finished and pending:
            yield pending.decode("utf-8", errors="replace")
            pending = b""
        if finished:
            return
        time.sleep(poll)
