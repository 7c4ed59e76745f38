"""A polite background job yields the CPU: slower while other processes fill the machine.

``step`` is the rule itself, fed counters as ``/proc/stat`` and ``os.times`` give them;
the end-to-end tests run a real detached worker against a real nginx beside real busy
loops (one per CPU but one, as a training loop leaves one core free) and read its log.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from prefetch.jobs.yielding import FLOOR_RATE, Sample, Steer, machine_cpu, step
from tests.test_jobs import job_id_from, poll, record, stop_leftover_workers  # noqa: F401 - fixture

MB = 1e6
GiB = 1 << 30


def sample(t: float, *, busy: float, idle: float, own: float, passed: float) -> Sample:
    return Sample(wall=t, busy=busy, idle=idle, own=own, passed=int(passed))


def run(state: Steer, intervals: list[dict]) -> list[float | None]:
    """Feed one-second intervals (CPU seconds busy/idle/own and bytes read in each); the limits."""
    now = sample(0.0, busy=0.0, idle=0.0, own=0.0, passed=0)
    limits = []
    for i, d in enumerate(intervals, 1):
        nxt = sample(float(i), busy=now.busy + d["busy"], idle=now.idle + d["idle"], own=now.own + d["own"],
                     passed=now.passed + d["bytes"])
        limits.append(step(state, now, nxt))
        now = nxt
    return limits


FULL = {"busy": 2.0, "idle": 0.0, "own": 0.8, "bytes": 400 * MB}  # 2 CPUs, none idle, the job at 400 MB/s


def test_a_full_machine_lowers_the_limit_step_by_step_but_never_in_the_first_interval():
    limits = run(Steer(), [FULL, FULL, FULL])
    assert limits[0] is None  # the first interval holds the engine's own start-up
    assert limits[1] == pytest.approx(0.75 * 400 * MB)
    assert limits[2] == pytest.approx(0.75 * 0.75 * 400 * MB)


def test_the_floor_is_what_five_percent_of_a_cpu_downloads():
    state = Steer()
    limits = run(state, [FULL] * 30)
    per_cpu = 400 * MB / 0.8
    assert limits[-1] == pytest.approx(max(FLOOR_RATE, 0.05 * per_cpu))


def test_no_yield_while_cpus_are_idle_or_others_are_quiet_or_the_job_is_a_small_rival():
    idle = dict(FULL, busy=1.2, idle=0.8)
    only_us = dict(FULL, busy=1.0, idle=0.0, own=0.8)  # nobody else: 0.2 CPU of others
    small = dict(FULL, own=0.05, bytes=20 * MB)  # a slow route: the job is no rival
    for kind in (idle, only_us, small):
        assert run(Steer(), [kind] * 4) == [None] * 4, kind


def test_idle_cpus_raise_the_limit_and_lift_it_above_the_fastest_rate_seen():
    state = Steer()
    roomy = {"busy": 1.0, "idle": 1.0, "own": 0.3, "bytes": 150 * MB}
    limits = run(state, [FULL, FULL, roomy, roomy, roomy, roomy])
    assert limits[1] == pytest.approx(300 * MB)
    assert limits[2] == pytest.approx(450 * MB)  # up by half
    assert limits[3] is None  # 675 MB/s is above 1.2 x the 400 MB/s peak: unlimited again


def test_machine_cpu_reads_proc_stat():
    got = machine_cpu()
    assert got is not None and got[0] > 0 and got[1] > 0


# -- end to end -----------------------------------------------------------------

def cpus() -> int:
    with open("/proc/stat") as f:
        return sum(1 for line in f if line[:3] == "cpu" and line[3:4].isdigit())


@pytest.fixture
def busy_loops():
    """One busy loop per CPU but one, at normal priority (a training loop's shape)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(1, cpus() - 1))]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.fixture
def big_zeros(nginx_origin):
    """A 1 GiB file of zeros (sparse on the server's disk) and its sha256."""
    path = nginx_origin.root / "zeros.bin"
    with open(path, "wb") as f:
        f.truncate(GiB)
    digest = hashlib.sha256()
    chunk = bytes(8 << 20)
    for _ in range(GiB // len(chunk)):
        digest.update(chunk)
    return nginx_origin.url_for("zeros.bin"), digest.hexdigest()


def start_job(cli, url: str, sha: str, out, *flags: str) -> str:
    started = cli("get", url, "-o", str(out), "--sha256", sha, "-b", *flags)
    assert started.returncode == 0, started.stderr
    return job_id_from(started.stdout)


def finish_job(cli, job_id: str, out) -> str:
    """Wait for the job; its log once the whole, verified file is in place."""
    waited = cli("wait", job_id, "--timeout", "300")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert out.stat().st_size == GiB  # verified by its sha256 before it was put there
    out.unlink()
    return record(job_id).log_path.read_text(encoding="utf-8")


def log_of(job_id: str) -> str:
    path = record(job_id).log_path
    return path.read_text(encoding="utf-8") if path.exists() else ""


@pytest.mark.skipif(cpus() < 2, reason="needs a CPU left for the job beside the busy loop")
def test_a_polite_job_yields_while_other_processes_fill_the_cpus(cli, big_zeros, busy_loops, tmp_path):
    url, sha = big_zeros
    out = tmp_path / "zeros.bin"
    job_id = start_job(cli, url, sha, out)
    poll(lambda: "yielding (at most" in log_of(job_id) or record(job_id).state != "running",
         timeout=120, what="the job's yield note")
    for loop in busy_loops:  # the machine is free again: the rest goes at the job's own pace
        loop.kill()
    log = finish_job(cli, job_id, out)
    assert "other processes need the CPU" in log and "yielding (at most" in log, log
    assert "--no-nice turns this off" in log
    assert "yielded to other processes" in log, log


@pytest.mark.skipif(cpus() < 2, reason="needs a CPU left for the job beside the busy loop")
def test_no_nice_does_not_yield(cli, big_zeros, busy_loops, tmp_path):
    url, sha = big_zeros
    out = tmp_path / "zeros.bin"
    log = finish_job(cli, start_job(cli, url, sha, out, "--no-nice"), out)
    assert "normal priority (--no-nice)" in log
    assert "yielding (at most" not in log and "yielded to other processes" not in log, log
