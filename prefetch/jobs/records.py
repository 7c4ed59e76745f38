"""Job records: where a job's record lives, reading, checking and writing it.

A job is one ``get`` request run by a detached worker process
(``python -m prefetch.jobs.worker JOB``). Its record, ``<state dir>/jobs/<id>.json``,
is rewritten atomically (temp file + rename, under ``jobs/.lock``) about once a
second by the worker; its log, ``<state dir>/jobs/<id>.log``, gets plain lines.
Readers never trust a "running" record blindly: when the worker's pid is gone
(or now belongs to another process, told apart by its start time in
``/proc/<pid>/stat``), the job is reported as ``interrupted`` and can be resumed.

What a record holds is in ``record_types.py``. This module is the one place that loads
records (``load_record``, ``get_job``, ``list_jobs``); ``liveness.py`` judges whether a running record's worker is still
there (``refresh_state``). Nothing here prints.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path

from prefetch.errors import ExitCode, JobNotFoundError, UsageError
from prefetch.fs.files import replace_file
from prefetch.fs.paths import state_dir
from prefetch.jobs.record_types import FileStatus, JobRecord, JobState


def this_host() -> str:
    """This machine's name, as job records store it (``host``)."""
    return os.uname().nodename


STALE_SECONDS = 120.0  # a running record not rewritten for this long, on another host, is stale
JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
GENERATED_ID_RE = re.compile(r"^j\d{4}-[0-9A-Za-z]{4,}$")  # looks like a job id, known or not


# -- paths and ids -------------------------------------------------------------------
def jobs_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where job records and logs live: ``<state dir>/jobs``."""
    return state_dir(env) / "jobs"


def check_job_id(job_id: str) -> str:
    """Return ``job_id`` if it is a safe job id.

    Raises:
        UsageError: it has path characters or is empty/too long.
    """
    if not isinstance(job_id, str) or not JOB_ID_RE.match(job_id):
        raise UsageError(
            f"invalid job id {job_id!r}: expected letters, digits, '-' or '_' (like j0518-a3f9); "
            f"`prefetch status` lists jobs"
        )
    return job_id


def check_timeout(timeout: float | None) -> float | None:
    """Return ``timeout`` (seconds, or None: no limit) if it is one.

    Raises:
        UsageError: NaN (no deadline would ever pass: a wait without end) or below zero.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise UsageError(f"invalid timeout {timeout!r}: expected seconds, 0 or more")
    return timeout


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
_NUM = (int, float)
# The JSON type(s) each field may have (None allowed where the tuple has type(None)).
_RECORD_TYPES: dict[str, tuple] = {
    "id": (str,), "command": (str,), "request": (dict,), "files": (list,), "state": (str,),
    "pid": (int, type(None)), "pid_start": (int, type(None)), "host": (str,),
    "started": _NUM, "updated": _NUM, "finished": (*_NUM, type(None)),
    "exit_code": (int, type(None)), "error": (str, type(None)), "log": (str,),
    "fail_fast": (bool,), "attempts": (int,), "cancel_requested": (bool,), "schema": (int,),
    "launcher": (int, type(None)), "launcher_start": (int, type(None)),
}
# Byte counts no file has (and ``status`` could not divide: 10**400 overflows a float).
_MAX_BYTES = 1 << 62
_SIZE_FIELDS = frozenset({"bytes", "total"})
_FILE_TYPES: dict[str, tuple] = {
    "name": (str,), "dataset": (str,), "path": (str,), "state": (str,), "bytes": (int,),
    "total": (int, type(None)), "rate": _NUM, "eta": (*_NUM, type(None)),
    "exit_code": (int, type(None)), "error": (str, type(None)), "count": (int, type(None)),
}


def _check_types(data: Mapping, types: dict[str, tuple], what: str) -> dict:
    out = {}
    for key, value in data.items():
        allowed = types.get(key)
        if allowed is None:
            continue  # a field from a newer version: ignored
        # bool is an int to Python, never to us (except where bool is what we want).
        if (isinstance(value, bool) and bool not in allowed) or not isinstance(value, allowed):
            raise TypeError(f"{what}field {key!r} is {type(value).__name__} {value!r:.40}, "
                            f"expected {' or '.join(t.__name__ for t in allowed)}")
        # Python's json reads NaN and Infinity (and 1e999 as inf); no field means them.
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{what}field {key!r} is {value!r}")
        if key in _SIZE_FIELDS and value is not None and not 0 <= value <= _MAX_BYTES:
            raise ValueError(f"{what}field {key!r} is {value!r:.40}, not a byte count")
        if key in ("rate", "eta", "count") and value is not None and value < 0:  # (the worker's are >= 0)
            raise ValueError(f"{what}field {key!r} is {value!r:.40}, below zero")
        if key == "exit_code" and value is not None and value not in set(ExitCode):  # `wait` exits with it
            raise ValueError(f"{what}field 'exit_code' is {value!r:.40}, not an exit code of prefetch")
        out[key] = value
    return out


def record_from_dict(data: Mapping) -> JobRecord:
    """Build a record from its JSON form, every field type-checked.

    Raises:
        TypeError, ValueError, KeyError: malformed (callers show the job as ``corrupt``).
    """
    if not isinstance(data, Mapping):
        raise TypeError("not a JSON object")
    fields = _check_types(data, _RECORD_TYPES, "")
    files = []
    for i, f in enumerate(fields.get("files", [])):
        if not isinstance(f, Mapping):
            raise TypeError(f"files[{i}] is not an object")
        files.append(FileStatus(**_check_types(f, _FILE_TYPES, f"files[{i}] ")))
    fields["files"] = files
    for key in ("id", "command", "request"):
        if key not in fields:
            raise KeyError(key)
    record = JobRecord(**fields)
    if not JOB_ID_RE.match(record.id):
        raise ValueError(f"bad id {record.id!r}")
    JobState(record.state)  # raises ValueError for an unknown state
    return record


def record_to_dict(record: JobRecord) -> dict:
    data = asdict(record)
    data["state"] = JobState(record.state).value
    for f in data["files"]:  # never NaN, Infinity or below zero in a record (readers take them as corrupt)
        if not (math.isfinite(f["rate"]) and f["rate"] >= 0):  # (a rate window whose file restarted)
            f["rate"] = 0.0
        if f["eta"] is not None and not (math.isfinite(f["eta"]) and f["eta"] >= 0):
            f["eta"] = None
    return data


def write_record(record: JobRecord, env: Mapping[str, str] | None = None) -> None:
    """Write ``record`` atomically (temp file, fsync, rename); callers hold ``locked_jobs``.

    Raises:
        LocalFileError: the disk is full or read-only (DiskFullError), or refuses otherwise.
    """
    path = record_path(record.id, env)
    data = json.dumps(record_to_dict(record), indent=1)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Its owner's alone: the request's links as given (a presigned link's signature, a token
        # or API key in a query), in a state dir others may often read (a 0755 home)
        replace_file(path, data.encode("utf-8"), durable=True, mode=0o600)
    except OSError as exc:  # a full or read-only disk: one line, not a crash (the old record stays)
        from prefetch.fs.files import local_error, overwrite_in_place

        # A full disk (the state dir on a small root disk): the record's own blocks still hold it,
        # written compactly over the old one (a job's end must not read as "interrupted").
        if exc.errno in (errno.ENOSPC, errno.EDQUOT) and overwrite_in_place(
                path, json.dumps(record_to_dict(record), separators=(",", ":")).encode("utf-8")):
            return
        raise local_error(exc, path, instead="PREFETCH_HOME") from None


def load_record(job_id: str, env: Mapping[str, str] | None = None) -> JobRecord:
    """The stored record as written (no liveness check).

    Raises:
        UsageError: bad id. JobNotFoundError: no such job.
        ValueError: the file is corrupt (callers turn that into a ``corrupt`` record).
    """
    from prefetch.errors import UnsafePathError

    path = record_path(job_id, env)
    try:
        raw = _read_record(path)  # never blocks on a FIFO
    except UnsafePathError as exc:
        raise ValueError(f"job file {path} is not a regular file") from exc
    except OSError as exc:
        raise ValueError(f"job file {path} cannot be read ({exc.strerror or exc})") from None
    if raw is None:
        raise JobNotFoundError(f"no job {job_id!r} in {path.parent}; `prefetch status` lists jobs") from None
    try:
        record = record_from_dict(json.loads(raw.decode("utf-8")))
        if record.id != job_id:
            # (planted or copied): written back, cleaned or cancelled, it would be another job's
            raise ValueError(f"it is the record of job {record.id!r}, not {job_id!r}")
        return record
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"job file {path} is corrupt ({exc.__class__.__name__}: {exc})") from None


def _read_record(path: Path) -> bytes | None:
    """A record's bytes (``safefs.read_bytes``, another account's included), or None when absent.
    One of ours that others may read, as a version before the nineteenth sitting wrote every
    record (0644: the links as given, a presigned link's signature, a ``token=``), is made 0600
    as it is read (``status`` reads each): a finished job's record is never written again. Its log,
    which every version before the twenty-first sitting left 0644 (each URL and path fetched), too.

    Raises:
        UnsafePathError: not a regular file. OSError: unreadable.
    """
    from prefetch.fs.safefs import keep_private, open_file_stat

    try:
        fd, st = open_file_stat(path, os.O_RDONLY, own=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as fh:
        # (one name only: a hard link to another file of ours, /etc/passwd as root, is not a record of
        # ours to change; prefetch never writes through a link it did not make)
        if st.st_uid == os.geteuid() and st.st_nlink == 1:
            keep_private(fd, st)
            from prefetch.jobs.log_file import keep_log_private

            keep_log_private(path.with_suffix(".log"))  # (its log too, which a finished job never opens again)
        return fh.read(64 << 20)


@contextmanager
def locked_jobs(env: Mapping[str, str] | None = None) -> Iterator[Path]:
    """Hold ``jobs/.lock`` so read-modify-write updates of records do not interleave."""
    from prefetch.fs.lock_files import exclusive_file_lock

    directory = jobs_dir(env)
    with ExitStack() as held:
        try:  # (another account's jobs dir, a read-only or full disk: one line, exit 5, not a crash)
            directory.mkdir(parents=True, exist_ok=True)
            held.enter_context(exclusive_file_lock(directory / ".lock", timeout=60, what="the jobs lock"))
        except OSError as exc:  # (never through a planted link: UnsafePathError passes)
            from prefetch.fs.files import local_error

            raise local_error(exc, directory / ".lock", instead="PREFETCH_HOME") from None
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


# -- the public JSON form ------------------------------------------------------------
def job_to_dict(record: JobRecord) -> dict:
    """The ``status --json`` form of one job (schema documented in commands/jobs.py)."""
    return {
        "id": record.id,
        "state": record.state,
        "exit_code": record.exit_code,
        "error": record.error,
        "command": record.command,
        "names": [_shown(n) for n in record.request.get("names", [])],
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
                "count": f.count,
            }
            for f in record.files
        ],
    }


def _shown(name):
    """A job's name as ``status`` shows it: a URL's signed query as ``(signed)`` (its password
    was hidden when the record was written)."""
    if not isinstance(name, str) or "?" not in name:
        return name  # (a dataset name, a URL without a query: no import for `status`)
    from prefetch.net.urls import hide_signed_query

    return hide_signed_query(name)
