"""Background job commands: status, log, wait, cancel, resume, jobs clean.

Each is a short adapter over ``prefetch.jobs``; tables are aligned text as wide
as their cells (never cut to a notebook pty's 80 columns), coloured by the
NO_COLOR/FORCE_COLOR rules, ``--json`` where a table is printed.
"""

from __future__ import annotations

import json
import sys
import time

import click

from prefetch.commands.invoked import follow_line, typed

RECENT_SECONDS = 3600.0  # `status` without --all: running jobs and those that ended this recently


def _rows(records, *, files: bool = False):
    from prefetch.jobs.views import table_rows

    return table_rows(records, files=files)


def _print_table(rows) -> None:
    from prefetch.commands.output import echo_table
    from prefetch.jobs.views import HEADERS

    echo_table(HEADERS, rows, right=(3, 4, 5, 6), state_columns=(2,))


def _hints(records) -> list[str]:
    """One line per job that needs the user: how to continue it, or why it failed (each said once)."""
    from prefetch.jobs import files_in_place

    lines = []
    for r in records:
        if r.state in ("interrupted", "cancelled"):
            if files_in_place(r):
                continue  # shown as done: a later get put its files in place
            lines.append(f"{r.id}: {r.state}; continue with `prefetch resume {r.id}`")
        elif r.state in ("failed", "corrupt") and r.error:
            lines.append(f"{r.id}: {r.state} (exit {r.exit_code}): {r.error}")
    return lines


def recent(records, *, now: float | None = None) -> tuple[list, int]:
    """Running jobs and the ones that ended within ``RECENT_SECONDS`` (else the latest); (shown, hidden)."""
    now = time.time() if now is None else now
    shown = [r for r in records if r.active or now - (r.finished or r.updated or r.started) < RECENT_SECONDS]
    if not shown and records:
        shown = records[-1:]
    return shown, len(records) - len(shown)


@click.command()
@click.argument("job", required=False)
@click.option("--all", "show_all", is_flag=True, help="Every job on record, not only running and recent ones.")
@click.option("--files", "per_file", is_flag=True, help="A row per file even for jobs of many files (summarized otherwise).")
@click.option("--json", "as_json", is_flag=True, help="Print the job records as JSON (schema below).")
def status(job, show_all, per_file, as_json):
    """Background jobs: per-file state, bytes, %, speed and ETA.

    \b
    Examples (in a notebook cell):
      !prefetch status
      !prefetch status --all
      !prefetch status j0518-a3f9 --json
      !prefetch status --files            # a row per file, for a job of many files

    \b
    Without --all: running jobs and those that ended in the last hour (--json
    always lists every job). A running job whose worker has gone (killed, kernel restart, OOM) shows as
    "interrupted"; `prefetch resume JOB` continues from the bytes on disk.

    \b
    --json schema (stable; new keys may be added; // comments are not part of it):
    {
      "schema": 1,
      "jobs": [                      // oldest first
        {
          "id": "j0518-a3f9",
          "state": "queued|running|done|failed|cancelled|interrupted|corrupt",
          "exit_code": 0,             // null while running; see "Exit codes"
          "error": null,              // why it failed / was interrupted
          "command": "prefetch get cifar10 -b",   // as retyped in a shell (HF_ENDPOINT=... in front: a pinned endpoint)
          "names": ["cifar10"],
          "pid": 12345, "host": "nb-7f9c",
          "started": 1779000000.0,    // epoch seconds; "updated", "finished" (null) too
          "attempts": 1,              // 2+ after `prefetch resume`
          "fail_fast": false,
          "log": "/root/.local/state/prefetch/jobs/j0518-a3f9.log",
          "bytes": 1048576, "total": 170498071, "rate": 2400000.0,
          "files": [
            {
              "name": "cifar-10-python.tar.gz", "dataset": "cifar10",
              "path": "/root/.keras/datasets/cifar-10-batches-py.tar.gz",
              "state": "pending|waiting|downloading|verified|extracting|done|cached|failed|interrupted|cancelled",
              "bytes": 1048576, "total": 170498071, "percent": 0.6,
              "rate": 2400000.0, "eta": 70.6,   // bytes/s, seconds (null when unknown)
              "exit_code": null, "error": null,
              "count": null               // a hf:// or ms:// repo's entry: its files, once placed
            }
          ]
        }
      ]
    }
    """
    from prefetch import jobs as lib

    records = [lib.get_job(job)] if job else lib.list_jobs()
    if as_json:
        click.echo(json.dumps({"schema": 1, "jobs": [lib.job_to_dict(r) for r in records]}, indent=2))
        return 0
    if not records:
        click.echo(typed("no jobs yet; start one with `prefetch get NAME -b`"))
        return 0
    hidden = 0
    if not job and not show_all:
        records, hidden = recent(records)
    _print_table(_rows(records, files=per_file))
    for line in _hints(records):
        click.echo(typed(line))
    if hidden:
        click.echo(typed(f"({hidden} older job{'s' if hidden != 1 else ''} not shown: `prefetch status --all`)"))
    return 0


@click.command()
@click.argument("job", required=False)
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until the job ends (like tail -f).")
def log(job, follow):
    """Show a job's log (default: the latest job); -f follows it until the job ends.

    \b
    Examples:
      !prefetch log
      !prefetch log -f j0518-a3f9
    """
    from prefetch import jobs as lib

    if job is None:
        latest = lib.latest_job()
        if latest is None:
            click.echo(typed("no jobs yet; start one with `prefetch get NAME -b`"))
            return 0
        job = latest.id
    from prefetch.ui.interrupt import interrupt_on_hangup, is_interrupt

    try:
        with interrupt_on_hangup():  # a closed terminal, a killed cell: as Ctrl-C
            for chunk in lib.iter_log(job, follow=follow):
                click.echo(chunk, nl=False)
                sys.stdout.flush()
    except (KeyboardInterrupt, RuntimeError) as exc:
        if not is_interrupt(exc):  # (a signal inside a lazy import's dataclass: 3.11 says RuntimeError)
            raise
        raise _keeps_running("following the log") from None
    return 0


@click.command()
@click.argument("targets", nargs=-1, metavar="[JOB|DATASET]...")
@click.option("--timeout", type=float, metavar="S", help="Give up after S seconds (exit 1; the jobs keep running).")
def wait(targets, timeout):
    """Block until jobs finish; exit 0, or the first failure's exit code.

    \b
    Without arguments: every job in `prefetch status` (`prefetch jobs clean`
    forgets finished ones; a stopped job whose files were put in place since
    by another get counts as done). A dataset name waits for the jobs that
    include it, then checks its files are in place.

    \b
    Examples:
      !prefetch wait
      !prefetch wait j0518-a3f9 --timeout 600
      !prefetch wait cifar10
    """
    from prefetch import jobs as lib

    from prefetch.ui.interrupt import interrupt_on_hangup, is_interrupt

    ticker = _WaitTicker()
    try:
        with interrupt_on_hangup():  # a closed terminal, a killed cell: as Ctrl-C
            result = lib.wait_for(list(targets) or None, timeout=timeout, on_poll=ticker)
    except (KeyboardInterrupt, RuntimeError) as exc:
        if not is_interrupt(exc):  # (a signal inside a lazy import's dataclass: 3.11 says RuntimeError)
            raise
        raise _keeps_running("waiting") from None
    finally:
        ticker.close()
    if not result.jobs and not result.datasets and not result.failures:
        click.echo("no jobs to wait for")
        return 0
    for r in result.jobs:
        line = f"{r.id} {r.state}"
        if r.state in ("done",):
            count = r.file_count  # (a repo's entry counts as its files)
            line += f" ({count} file{'s' if count != 1 else ''} in place)"
        click.echo(typed(line))
    for job_id in result.superseded:
        click.echo(f"{job_id}: stopped earlier, but its files are in place now")
    for name in result.datasets:
        click.echo(f"{name} in place")
    from prefetch.commands.error_line import error_line

    for failure in result.failures:
        click.echo(f"prefetch: error: {error_line(failure)}", err=True)
    return result.exit_code


class _WaitTicker:
    """Progress while waiting, on stderr: one line rewritten in place about once a second
    on a terminal or notebook cell; elsewhere (a pipe, --plain) a plain line every 30 s."""

    def __init__(self) -> None:
        from prefetch.ui.style import detect_style

        self.style = detect_style(sys.stderr)
        self.every = 1.0 if self.style.live else 30.0
        self.last = time.monotonic()
        self.width = 0

    def __call__(self, records) -> None:
        from prefetch.jobs.views import progress_line

        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        line = progress_line(records)
        if not line:
            return
        if self.style.live:
            sys.stderr.write("\r" + line.ljust(self.width))
            self.width = len(line)
            sys.stderr.flush()
        else:
            click.echo(line, err=True)

    def close(self) -> None:
        """End the live line so what follows starts on a line of its own."""
        if self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
            self.width = 0


def _keeps_running(what: str):
    from prefetch.errors import InterruptedTransferError

    return InterruptedTransferError(
        f"stopped {what}; the job keeps running in the background (`prefetch status`, `prefetch wait`)"
    )


@click.command()
@click.argument("job")
@click.option("--timeout", type=float, default=30.0, show_default=True, metavar="S",
              help="How long to wait for the worker to save its state and stop.")
def cancel(job, timeout):
    """Stop a background job cleanly (state saved; `prefetch resume JOB` continues).

    \b
    Example:
      !prefetch cancel j0518-a3f9
    """
    from prefetch import jobs as lib

    before = lib.get_job(job)
    if not before.active:
        click.echo(f"{job} is not running ({before.state}); nothing to cancel")
        return 0
    record = lib.cancel_job(job, timeout=timeout)
    if record.state == "done":  # (it ended while the cancel reached it: nothing is left to resume)
        click.echo(f"{job} done: it finished before the cancel reached it; its files are in place")
    else:
        click.echo(typed(f"{job} {record.state}; continue with `prefetch resume {job}`"))
    return 0


@click.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True, help="Print the job id, log and pid as JSON.")
def resume(job, as_json):
    """Restart a stopped job (interrupted, cancelled or failed) from the bytes on disk.

    \b
    Example:
      !prefetch resume j0518-a3f9
    """
    from prefetch import jobs as lib

    record = lib.resume_job(job)
    if as_json:
        click.echo(json.dumps({"job": record.id, "log": record.log, "pid": record.pid}))
    else:
        click.echo(f"resumed job {record.id} (pid {record.pid}); log: {record.log}")
        click.echo(follow_line(record.id))
    return 0


@click.group()
def jobs():
    """Manage job records and logs."""


@jobs.command()
@click.option("--all", "include_interrupted", is_flag=True, help="Also forget interrupted (resumable) jobs.")
def clean(include_interrupted):
    """Forget finished jobs (done, failed, cancelled, corrupt): remove their records and logs.

    Running jobs are never touched; interrupted ones are kept unless --all.
    """
    from prefetch import jobs as lib

    result = lib.clean_jobs(include_interrupted=include_interrupted)
    if not result.removed:
        click.echo("no finished jobs to remove")
    else:
        click.echo(f"removed {len(result.removed)} job(s): {', '.join(result.removed)}")
    if result.kept:
        click.echo(f"kept {len(result.kept)}: {', '.join(result.kept)}")
    return 0
