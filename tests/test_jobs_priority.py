"""A background worker's priority: nice 19 and the idle I/O class by default; --no-nice and PREFETCH_NICE=0.

Each test starts a real detached worker against a throttled loopback origin and reads
every one of its threads' nice value from /proc and its I/O class with the ioprio_get
syscall, while it downloads.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_jobs import job_id_from, poll, record, stop_leftover_workers, synth  # noqa: F401 - fixtures

IOPRIO_GET = {"x86_64": 252, "aarch64": 31}[os.uname().machine]
IDLE = 3


def io_class(tid: int) -> int:
    """The I/O scheduling class of thread ``tid`` (0 = none set: follows its nice, "best effort")."""
    libc = ctypes.CDLL(None, use_errno=True)
    value = libc.syscall(IOPRIO_GET, 1, tid)  # IOPRIO_WHO_PROCESS
    assert value >= 0, os.strerror(ctypes.get_errno())
    return value >> 13


def nice_of(tid: int) -> int:
    """Field 19 of /proc/TID/stat (after the parenthesised command name)."""
    stat = Path(f"/proc/{tid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[16])


def group_nice(pid: int) -> int | None:
    """The nice of ``pid``'s session scheduling group (/proc/PID/autogroup); None when it is in none."""
    try:
        words = Path(f"/proc/{pid}/autogroup").read_text().split()
    except FileNotFoundError:  # a kernel built without autogroup
        return None
    return int(words[-1]) if words else None  # empty: the process's CPU share is a cgroup's


def worker_threads(pid: int) -> list[int]:
    return [int(t) for t in os.listdir(f"/proc/{pid}/task")]


def start_downloading_job(cli, synth, origin, *args: str, env: dict | None = None) -> tuple[str, int]:
    """A job that downloads slowly with two connections: (job id, worker pid) once bytes arrive."""
    registry, _ = synth
    origin.rate = 100_000
    started = cli("get", "synth", "--registry", str(registry), "--connections", "2", *args, "-b", env=env)
    assert started.returncode == 0, started.stderr
    job_id = job_id_from(started.stdout)
    poll(lambda: record(job_id).files[0].bytes > 0, what="bytes on disk")
    pid = record(job_id).pid
    poll(lambda: len(worker_threads(pid)) >= 3, what="the worker's connection threads")
    return job_id, pid


def test_a_background_worker_runs_at_nice_19_in_the_idle_io_class(synth, origin, cli):
    own_group = group_nice(os.getpid())
    job_id, pid = start_downloading_job(cli, synth, origin)
    threads = worker_threads(pid)
    assert {nice_of(t) for t in threads} == {19}, threads  # every thread: the downloading ones too
    assert {io_class(t) for t in threads} == {IDLE}
    log = record(job_id).log_path.read_text(encoding="utf-8")
    if own_group is None:  # a kernel without autogroup: nice alone ranks the threads
        assert "nice 19, I/O class idle" in log, log
    else:
        # Under autogroup, nice only ranks threads within a session's group and the groups
        # share the CPUs equally: the worker's own session group must be at nice 19 too,
        # and this process's group (the notebook's, here the test's) untouched.
        assert group_nice(pid) == 19
        assert group_nice(os.getpid()) == own_group
        assert "nice 19, session group nice 19, I/O class idle" in log, log
    assert "--no-nice" not in record(job_id).command


@pytest.mark.parametrize("how", ["flag", "env"])
def test_no_nice_and_prefetch_nice_0_keep_normal_priority_across_a_resume(synth, origin, cli, how):
    own_nice, own_class = os.getpriority(os.PRIO_PROCESS, 0), io_class(os.getpid())
    assert own_class != IDLE and own_nice < 19
    env = dict(os.environ, PREFETCH_NICE="0") if how == "env" else None
    job_id, pid = start_downloading_job(cli, synth, origin, *(["--no-nice"] if how == "flag" else []), env=env)
    threads = worker_threads(pid)
    assert {nice_of(t) for t in threads} == {own_nice}
    assert {io_class(t) for t in threads} == {own_class}
    assert group_nice(pid) in (None, 0)
    assert record(job_id).command.endswith("--no-nice -b")  # how to run it again, said in `status`
    log = record(job_id).log_path.read_text(encoding="utf-8")
    assert "normal priority (--no-nice)" in log, log

    # The choice is the job's: a resume from a shell without the variable keeps it.
    assert cli("cancel", job_id).returncode == 0
    resumed = cli("resume", job_id)
    assert resumed.returncode == 0, resumed.stderr
    pid = poll(lambda: (r := record(job_id)).state == "running" and r.pid != pid and r.pid, what="a new worker")
    poll(lambda: len(worker_threads(pid)) >= 2, what="the resumed worker's threads")
    assert {nice_of(t) for t in worker_threads(pid)} == {own_nice}
    assert {io_class(t) for t in worker_threads(pid)} == {own_class}


def test_a_bad_prefetch_nice_is_a_usage_error_and_starts_nothing(synth, cli):
    registry, _ = synth
    result = cli("get", "synth", "--registry", str(registry), "-b", env=dict(os.environ, PREFETCH_NICE="maybe"))
    assert result.returncode == 2
    assert "PREFETCH_NICE='maybe'" in result.stderr
    assert "started job" not in result.stdout


def connections_used(nginx) -> int:
    """Distinct TCP connections that carried a request, from nginx's ``$connection`` log."""
    return len({conn for conn, *_ in nginx.requests()})


@pytest.mark.parametrize("polite", [True, False])
def test_a_polite_job_takes_one_connection_where_one_is_as_fast_as_many(nginx_origin, cli, tmp_path, polite):
    size = 64 << 20  # loopback: one connection brings it at hundreds of MB/s
    (nginx_origin.root / "big.bin").write_bytes(os.urandom(size))
    out = tmp_path / "big.bin"

    started = cli("get", nginx_origin.url_for("big.bin"), "-o", str(out), "-b", *([] if polite else ["--no-nice"]))
    assert started.returncode == 0, started.stderr
    waited = cli("wait", job_id_from(started.stdout), "--timeout", "60")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert out.stat().st_size == size
    used = connections_used(nginx_origin)
    if polite:
        assert used <= 2, f"{used} connections for a file one loopback connection brings as fast"
    else:  # the ramp's own way: it starts several at once (what the polite job spares)
        assert used > 2, used


BUSY = r"""
import os, sys
os.sched_setaffinity(0, {int(sys.argv[1])})
os.setsid()  # its own session group where the kernel has them, at nice 3 like the loop itself
try:
    with open("/proc/self/autogroup", "w") as group:
        group.write("3")
except OSError:
    pass
os.nice(3)  # (nice 19 against 3: the job gets ~3% of the CPU, 4 MB a tenth of a second, and starts in seconds)
while True:
    pass
"""


def test_a_polite_job_beside_work_that_holds_its_cpu_stays_at_one_connection(nginx_origin, cli, tmp_path):
    """The polite job's case: a training loop keeps the CPU busy. The job, at nice 19, gets
    that CPU a sliver of the time and its one connection brings far less than 200 MB/s, its
    first answer late enough to look like a long route: judged on the rate and the route alone
    it took the ramp's 8 connections or the long route's 12 (threads asking for the CPU the
    training holds; the test above failed 10 of 15 runs at load 6-19). The job and a busy loop
    share one CPU here, whatever else the machine does: the job stays at one connection."""
    size = 16 << 20
    (nginx_origin.root / "big.bin").write_bytes(os.urandom(size))
    out = tmp_path / "big.bin"
    mine = os.sched_getaffinity(0)
    cpu = min(mine)
    busy = subprocess.Popen([sys.executable, "-c", BUSY, str(cpu)])
    try:
        os.sched_setaffinity(0, {cpu})  # (the job's processes, started now, inherit it)
        try:
            started = cli("get", nginx_origin.url_for("big.bin"), "-o", str(out), "-b")
        finally:
            os.sched_setaffinity(0, mine)
        assert started.returncode == 0, started.stderr
        waited = cli("wait", job_id_from(started.stdout), "--timeout", "300")
    finally:
        busy.kill()
        busy.wait()
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert out.stat().st_size == size
    used = connections_used(nginx_origin)
    assert used == 1, f"{used} connections for a job the CPU, not the link, holds back"


@pytest.mark.parametrize(
    "content, said, left",
    [
        ("/autogroup-7 nice 19\n", "session group nice 19", "/autogroup-7 nice 19\n"),  # already there
        ("", None, ""),  # in a cgroup's CPU share (a container): no session group to raise
        (None, None, None),  # a kernel built without autogroup
    ],
)
def test_the_session_group_is_raised_only_where_the_process_has_one(tmp_path, content, said, left):
    from prefetch.jobs.priority import raise_group_nice

    group = tmp_path / "autogroup"  # a plain file stands in for /proc/self/autogroup
    if content is not None:
        group.write_text(content, encoding="ascii")
    assert raise_group_nice(str(group)) == said
    assert (group.read_text(encoding="ascii") if group.exists() else None) == left
