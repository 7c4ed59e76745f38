"""A background job's progress: its record rewritten about once a second and its log lines.

:class:`JobProgress` is the event sink of ``jobs/worker.py``: it claims the job's record for
this worker, writes one plain log line per event worth keeping (``ui.render``), keeps each
file's state, bytes and rate in the record (a heartbeat at least every ``HEARTBEAT_SECONDS``
while running), and writes the job's end. The test hook ``PREFETCH_TEST_PAUSE_AT`` pauses it
at an event (see ``jobs/worker.py``).

May import: ``errors``, ``model``, ``fs``, ``ui``, and ``jobs``' own modules.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TextIO

from prefetch.errors import ExitCode, LocalFileError

HEARTBEAT_SECONDS = 20.0  # the record is rewritten at least this often while running


class JobProgress:
    """The worker's event sink: log lines plus the per-file state in the job record."""

    def __init__(self, job_id: str, files, *, log: TextIO, stop: threading.Event, env,
                 signalled: list[int] | None = None, spare=None) -> None:
        from prefetch.ui.render import LineRenderer

        self.spare = spare  # descriptors given back to write the end (jobs/out_of_files.py)
        self.job_id = job_id
        self.files = files
        self.by_name: dict[str, list] = {}
        for f in files:
            self.by_name.setdefault(f.name, []).append(f)
        self.log = log
        self.renderer = LineRenderer(log)
        self.stop = stop
        self.signalled = signalled if signalled is not None else []
        self.env = env
        self.lock = threading.Lock()
        self.dirty = False
        self.closed = threading.Event()
        self.final_state = "running"
        self.flusher: threading.Thread | None = None
        self.pause_at, self.pause_count = _pause_hook(env)
        self.seen: dict[str, int] = {}

    # -- record ------------------------------------------------------------------
    def claim(self) -> int | None:
        """Mark the record running with our pid; an exit code if we must not run."""
        from prefetch import jobs

        refused: list[int] = []

        def take(rec) -> None:
            if rec.state == jobs.JobState.CANCELLED.value:
                refused.append(int(ExitCode.INTERRUPTED))
                return
            other = rec.pid not in (None, os.getpid()) and jobs.is_process_alive(rec.pid, rec.pid_start)
            if other and rec.state == jobs.JobState.RUNNING.value:
                refused.append(int(ExitCode.USAGE))
                return
            rec.state = jobs.JobState.RUNNING.value
            rec.pid = os.getpid()
            rec.pid_start = jobs.process_start_time(os.getpid())
            rec.host = jobs.this_host()  # what refresh_state compares with

        jobs.update_record(self.job_id, take, self.env)
        if refused:
            cancelled = refused[0] == int(ExitCode.INTERRUPTED)
            self.final_state = "cancelled" if cancelled else "refused"
            self.log_line(f"job {self.job_id} not started: {'cancelled' if cancelled else 'another worker runs it'}")
            return refused[0]
        self.flusher = threading.Thread(target=self._flush_loop, name="prefetch-job-record", daemon=True)
        self.flusher.start()
        return None

    def _flush_loop(self) -> None:
        last = time.monotonic()
        while not self.closed.wait(1.0):
            # A heartbeat even when nothing moves (e.g. waiting for another
            # process's lock): readers on other hosts judge liveness by it.
            heartbeat = time.monotonic() - last >= HEARTBEAT_SECONDS
            if self.flush(force=heartbeat):
                last = time.monotonic()

    def flush(self, *, force: bool = False) -> bool:
        """Write the per-file state into the record if it changed (or ``force``); True if written."""
        from prefetch import jobs

        with self.lock:
            if not (self.dirty or force) or (self.closed.is_set() and not force):
                return False
            self.dirty = False
            snapshot = [replace(f) for f in self.files]

        def put(rec) -> None:
            rec.files = snapshot

        try:
            jobs.update_record(self.job_id, put, self.env)
        except Exception as exc:  # noqa: BLE001 - a status glitch must not stop the download
            self.log_line(f"job {self.job_id} could not update its record: {exc}")
            return False
        return True

    def finish(self, *, state: str, exit_code: int, error: str | None) -> int:
        """Record the final state; returns ``exit_code``."""
        from prefetch import jobs

        self.closed.set()
        if self.flusher is not None:
            self.flusher.join()
        with self.lock:
            snapshot = [replace(f) for f in self.files]
        self.final_state = state

        def end(rec) -> None:
            rec.files = snapshot
            rec.state = state
            rec.exit_code = exit_code
            rec.error = error or None
            rec.finished = time.time()

        if self.spare is not None:
            self.spare.release()
        try:
            jobs.update_record(self.job_id, end, self.env)
        except (LocalFileError, OSError) as exc:  # its disk refuses even that: said once, not a crash of the worker
            self.log_line(f"job {self.job_id} could not record its end ({state}, exit {exit_code}): {exc}")
        return exit_code

    def apply_results(self, results, *, cancelled: bool) -> None:
        """Per-file final states from ``run_request``'s results."""
        with self.lock:
            repos: dict[str, int] = {}  # a repo's entry (hf://, ms://): its own files' results count
            for r in results:
                f = self._file(r.name)
                if f is None:
                    if r.dataset in self.by_name and r.name != r.dataset and not failed_result(r):
                        repos[r.dataset] = repos.get(r.dataset, 0) + 1
                    continue
                f.rate, f.eta = 0.0, None
                if failed_result(r):
                    f.exit_code = r.exit_code or int(ExitCode.FAILURE)
                    f.error = r.error
                    if f.exit_code == int(ExitCode.INTERRUPTED):
                        f.state = "cancelled" if cancelled else "interrupted"
                    else:
                        f.state = "failed"
                else:
                    f.state = "done" if r.status == "downloaded" else "cached"
                    f.exit_code = 0
                    f.error = None
                    f.bytes = r.size
                    f.total = r.size
                    if r.path and os.path.dirname(r.path) == os.path.dirname(f.path):
                        f.path = r.path  # (--content-disposition: the server's name, in the folder planned)
            for name, count in repos.items():
                for f in self.by_name[name]:
                    if f.state in ("done", "cached"):
                        f.count = count
            self.dirty = True

    def _file(self, name: str):
        candidates = self.by_name.get(name) or []
        for f in candidates:
            if f.state not in ("done", "cached", "failed"):
                return f
        return candidates[0] if candidates else None

    # -- events ------------------------------------------------------------------
    def __call__(self, event) -> None:
        from prefetch.model.events import SAVED_AS, EventKind

        with self.lock:
            f = self._file(event.file)
            if f is not None:
                kind = event.kind
                if kind in (EventKind.START, EventKind.PROGRESS):
                    if not (kind is EventKind.PROGRESS and f.state == "waiting" and event.done <= f.bytes):
                        f.state = "downloading"  # (a transfer waiting for its first connection reports too)
                    f.bytes, f.total = event.done, event.total
                    f.rate, f.eta = event.rate, event.eta
                elif kind is EventKind.NOTE and event.message.startswith("waiting for"):
                    f.state = "waiting"
                    f.bytes = max(f.bytes or 0, event.done)
                elif kind is EventKind.NOTE and event.message.startswith(SAVED_AS):
                    # --content-disposition named it (flow/served_names.py): that path from now on
                    f.path = os.path.join(os.path.dirname(f.path), event.message[len(SAVED_AS):])
                elif kind is EventKind.VERIFY:
                    f.state = "verified"
                    f.bytes, f.total, f.rate, f.eta = event.done, event.total, 0.0, None
                elif kind is EventKind.EXTRACT:
                    f.state = "extracting"
                elif kind in (EventKind.DONE, EventKind.CACHED):
                    f.state = "done" if kind is EventKind.DONE else "cached"
                    f.bytes, f.total, f.rate, f.eta = event.done, event.total, 0.0, None
                    f.exit_code, f.error = 0, None
                elif kind is EventKind.FAILED:
                    f.exit_code = event.exit_code or int(ExitCode.FAILURE)
                    f.error = event.message
                    f.state = "interrupted" if f.exit_code == int(ExitCode.INTERRUPTED) else "failed"
                    f.rate, f.eta = 0.0, None
                self.dirty = True
        # A file stopped by `prefetch cancel` (SIGTERM) is "cancelled" in the log, not "failed exit=7".
        self.renderer.stopped_word = "cancelled" if self.signalled else "interrupted"
        self.renderer(event)
        self._maybe_pause(event)

    def log_line(self, text: str) -> None:
        """A job-level line in the log, in the same shape as event lines."""
        from prefetch.ui.render import timestamp

        with self.renderer.lock:  # the renderer writes event lines to the same stream
            self.log.write(f"{timestamp()} {' '.join(text.split())}\n")
            self.log.flush()

    def _maybe_pause(self, event) -> None:
        # Test hook (see the module docstring).
        if self.pause_at is None or event.kind.value != self.pause_at:
            return
        count = self.seen.get(self.pause_at, 0) + 1
        self.seen[self.pause_at] = count
        if count != self.pause_count:
            return
        self.flush(force=True)
        seconds = float(self.env.get("PREFETCH_TEST_PAUSE_SECONDS", "60"))
        self.log_line(f"{event.file} note test hook: pausing at {self.pause_at} for {seconds:g}s")
        self.stop.wait(seconds)


def _pause_hook(env: Mapping[str, str]) -> tuple[str | None, int]:
    value = env.get("PREFETCH_TEST_PAUSE_AT", "").strip().lower()
    if not value:
        return None, 0
    kind, _, count = value.partition(":")
    return kind, int(count) if count.isdigit() else 1


def failed_result(result) -> bool:
    """A file's result that did not end in place (failed, interrupted, or a non-zero code)."""
    return result.status in ("failed", "interrupted") or bool(result.exit_code)
