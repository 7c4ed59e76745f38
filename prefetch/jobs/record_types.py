"""What a job record holds: its state, its files' states, and the record itself.

``JobRecord`` (one ``get`` request run by a detached worker) and ``FileStatus`` (one of its
files, as the worker last reported it) are plain dataclasses; ``records.py`` says where a
record lives and reads, checks and writes it. Nothing here reads a record or prints.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from prefetch.jobs.views import html_table, short_repr

RECORD_SCHEMA = 1


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
    count: int | None = None  # the files this entry stands for (a hf:// or ms:// repo's), once placed

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
    # The process that wrote the queued record and starts the worker (pid, start time): gone
    # before the worker's pid is recorded, the job never started (liveness.refresh_state).
    launcher: int | None = None
    launcher_start: int | None = None

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
    def file_count(self) -> int:
        """The files the job places: a repo entry counts as its files once known."""
        return sum(1 if f.count is None else f.count for f in self.files)

    @property
    def datasets(self) -> list[str]:
        return list(dict.fromkeys(f.dataset for f in self.files))

    @property
    def in_place(self) -> bool:
        """Every file of the job is at its final path (only ever complete and verified)."""
        return files_in_place(self)

    def __repr__(self) -> str:
        return short_repr(self)

    def _repr_html_(self) -> str:
        return f"<p>{short_repr(self)[1:-1]}</p>" + html_table([self])


def files_in_place(record: JobRecord) -> bool:
    """True when every file of ``record`` is at its final path (only ever complete and verified)."""
    return bool(record.files) and all(file_in_place(record, f) for f in record.files)


def file_in_place(record: JobRecord, f: FileStatus) -> bool:
    """``f`` of ``record`` is at its final path (a regular file: a FIFO is not a file in place).

    A Hugging Face repo at a branch or tag has its ref as that path (written last): a ref made
    before the job started names the commit an earlier get placed, which need not be the one
    the job was fetching (the branch moved on, or a wider selection), so only a ref written
    since counts. (An ``hf://...@COMMIT`` repo's path is its selection's manifest, an ``ms://``
    repo's a record its run removes first: both say this very request is complete.)
    """
    try:
        st = os.stat(f.path)
    except (OSError, ValueError):
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    if f.name[:5].lower() == "hf://" and os.path.basename(os.path.dirname(f.path)) != "hub-complete":
        return st.st_mtime >= record.started
    return True
