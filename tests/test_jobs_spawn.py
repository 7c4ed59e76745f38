"""How a ``get -b`` launcher starts its worker (``jobs/launch.py``: ``os.posix_spawn`` on
Linux with Python 3.11+, else ``subprocess``): what the worker keeps of the caller."""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

from tests.test_jobs import job_id_from, poll, record, stop_leftover_workers, synth  # noqa: F401 - fixtures


def test_the_worker_keeps_no_descriptor_of_the_caller_and_runs_in_the_jobs_dir(synth, origin, home, tmp_path):
    """An inheritable descriptor the caller's shell left open (a notebook cell's pipe) is not
    the worker's: the cell sees its end as soon as the launcher exits. The worker's
    directory is the jobs dir, not the caller's (which may go away), and its stdio is the log."""
    registry, _ = synth
    origin.rate = 100_000  # the worker is still downloading while we look
    caller = tmp_path / "caller"
    caller.mkdir()
    read, write = os.pipe()
    try:
        started = subprocess.run([sys.executable, "-m", "prefetch", "get", "synth", "--registry", str(registry), "-b"],
                                 capture_output=True, text=True, timeout=120, cwd=caller, pass_fds=(write,),
                                 stdin=subprocess.DEVNULL)
    finally:
        os.close(write)
    try:
        assert started.returncode == 0, started.stderr
        job_id = job_id_from(started.stdout)
        pid = poll(lambda: record(job_id).pid, what="the worker's pid")
        assert record(job_id).active
        readable, _, _ = select.select([read], [], [], 10)
        assert readable and os.read(read, 1) == b"", "the worker holds the caller's pipe"
    finally:
        os.close(read)
    jobs = record(job_id).log_path.parent
    poll(lambda: Path(os.readlink(f"/proc/{pid}/cwd")) == jobs.resolve(), what="the worker in the jobs dir")
    assert Path(os.readlink(f"/proc/{pid}/fd/1")) == Path(os.readlink(f"/proc/{pid}/fd/2")) == \
        record(job_id).log_path.resolve()
    assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull
    assert os.getsid(pid) == pid  # a session of its own


def test_a_caller_without_stdin_still_gives_the_worker_its_log(synth, origin, home, tmp_path):
    """A caller whose descriptor 0 is closed (a daemon, a ``<&-``) opens the job's log as
    descriptor 0, which the worker's stdin (/dev/null) replaces: its stdout and stderr must
    still be the log (where a crash of the worker is written), as ``subprocess`` makes them."""
    registry, _ = synth
    origin.rate = 100_000  # the worker is still downloading while we look
    started = subprocess.run(["sh", "-c", 'exec 0<&- && exec "$@"', "sh", sys.executable, "-m", "prefetch", "get",
                              "synth", "--registry", str(registry), "-b"],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    job_id = job_id_from(started.stdout)
    pid = poll(lambda: record(job_id).pid, what="the worker's pid")
    assert record(job_id).active
    log = record(job_id).log_path.resolve()
    assert Path(os.readlink(f"/proc/{pid}/fd/1")) == Path(os.readlink(f"/proc/{pid}/fd/2")) == log
    assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull


def test_a_kernel_whose_directory_went_away_starts_a_worker_that_runs(synth, home, tmp_path):
    """A long-lived process (a notebook kernel) whose directory was removed, with a relative
    entry in PYTHONPATH (``export PYTHONPATH=$PYTHONPATH:/x`` leaves an empty one): a worker
    started there could not even start (Python cannot make the entry absolute: "Fatal Python
    error: error evaluating path"). It must run the job, as a worker started in the jobs dir did."""
    from tests.conftest import run_cli

    registry, data = synth
    kernel_dir = tmp_path / "kernel"
    kernel_dir.mkdir()
    code = ("import os, sys, prefetch\n"
            "os.rmdir(os.getcwd())\n"
            f"job = prefetch.ensure('synth', background=True, registry={str(registry)!r})\n"
            "print('started job', job.id)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             cwd=kernel_dir, env=env, stdin=subprocess.DEVNULL)
    assert started.returncode == 0, started.stderr
    assert not kernel_dir.exists()
    job_id = job_id_from(started.stdout)
    waited = run_cli("wait", job_id, timeout=120)
    assert waited.returncode == 0, (waited.stderr, record(job_id).log_path.read_text())
    assert "Fatal Python error" not in record(job_id).log_path.read_text()
