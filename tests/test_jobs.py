"""Background jobs through the real CLI: get -b, status, log, wait, cancel, resume, jobs clean.

Every job here is a real detached worker process downloading from a loopback origin.
Helpers at the top are shared with test_jobs_kill.py and test_api.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prefetch.ui.render import PROGRESS_LINE

SIZE = 1_200_000


# -- helpers ---------------------------------------------------------------------------
def write_registry(path: Path, origin, datasets: dict[str, list[dict]]) -> Path:
    """A user registry whose files live on ``origin``.

    Each file: ``name``, ``data`` (put on the origin unless ``serve=False``), optional
    ``target`` (default: name), ``extract`` (dirs), ``sha256`` (default: of ``data``).
    """
    lines = []
    for dataset, files in datasets.items():
        lines += [f"[{dataset}]", f'description = "synthetic {dataset} for tests"']
        for f in files:
            if f.get("serve", True):
                origin.put(f["name"], f["data"])
            digest = f.get("sha256") or hashlib.sha256(f["data"]).hexdigest()
            lines += [
                f"[[{dataset}.files]]",
                f'name = "{f["name"]}"',
                f'url = "{origin.url_for(f["name"])}"',
                f'sha256 = "{digest}"',
                f'target = "{f.get("target", f["name"])}"',
            ]
            if f.get("extract"):
                lines.append("extract = [" + ", ".join(f'"{d}"' for d in f["extract"]) + "]")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def synthetic(size: int = SIZE, seed: int = 1) -> bytes:
    """Incompressible, reproducible bytes."""
    out = bytearray()
    block = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block * 8
    return bytes(out[:size])


def job_id_from(text: str) -> str:
    match = re.search(r"(?:started|resumed) job (\S+)", text)
    assert match, f"no job id in {text!r}"
    return match.group(1)


def poll(check, *, timeout: float = 120.0, interval: float = 0.05, what: str = "condition"):
    """Call ``check`` until it returns something truthy; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def record(job_id: str):
    from prefetch.jobs import get_job

    return get_job(job_id)


def status_json(cli, *args) -> dict:
    result = cli("status", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def leftovers(*roots: Path) -> list[Path]:
    """Temp files/dirs that must not survive a finished download."""
    found = []
    for root in roots:
        if not root.exists():
            continue
        for path in root.rglob("*"):
            name = path.name
            if name.endswith((".part", ".tmp")) or ".extract-" in name or ".old-" in name:
                found.append(path)
    return found


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def stop_leftover_workers(home):
    """After each test, kill any worker still running in that test's isolated home."""
    yield
    import signal

    from prefetch.jobs import list_jobs

    for job in list_jobs():
        if job.active and job.pid:
            try:
                os.kill(job.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def write_synth_registry(path: Path, origin) -> tuple[Path, bytes]:
    """Registry with ``synth`` (one 1.2 MB file), ``missing`` (404) and ``badhash`` (sha256 mismatch)."""
    data = synthetic()
    registry = write_registry(
        path,
        origin,
        {
            "synth": [{"name": "synth.bin", "data": data}],
            "missing": [{"name": "nope.bin", "data": b"x", "serve": False}],
            "badhash": [{"name": "bad.bin", "data": b"payload" * 1000, "sha256": "0" * 64}],
        },
    )
    return registry, data


@pytest.fixture
def synth(home, origin, tmp_path):
    """``write_synth_registry``'s (registry path, synth.bin bytes)."""
    return write_synth_registry(tmp_path / "registry.toml", origin)


# -- tests -----------------------------------------------------------------------------
def test_background_get_in_a_pty_shell_that_exits_at_once_completes_and_verifies(synth, origin, home, cli):
    """As in a notebook `!` cell: `sh -c 'prefetch get ... -b'` under a pty; the shell exits,
    the pty is closed, and the download carries on to a verified file."""
    registry, data = synth
    origin.rate = 250_000  # one connection: ~5 s for the file
    command = f"{sys.executable} -m prefetch get synth --registry {registry} --connections 1 -b"
    pid, master = pty.fork()
    if pid == 0:  # the child: a shell on the pty, as ipykernel runs a cell
        try:
            os.execvpe("sh", ["sh", "-c", command], os.environ)
        finally:
            os._exit(127)
    output = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the shell exited and closed the pty's slave side
            break
        if not chunk:
            break
        output += chunk
    _, wait_status = os.waitpid(pid, 0)
    os.close(master)  # hang up the terminal, as the notebook does after the cell
    served_when_the_shell_exited = origin.bytes_sent
    text = output.decode("utf-8", "replace")
    assert os.waitstatus_to_exitcode(wait_status) == 0, text
    job_id = job_id_from(text)
    assert "log:" in text
    # The shell is gone and its terminal closed while the file was still downloading.
    assert served_when_the_shell_exited < len(data)

    result = cli("wait", job_id, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"{job_id} done" in result.stdout
    target = home / ".keras" / "datasets" / "synth.bin"
    assert sha256_of(target) == hashlib.sha256(data).hexdigest()
    done = record(job_id)
    assert done.state == "done" and done.exit_code == 0
    assert [f.state for f in done.files] == ["done"]
    assert done.files[0].bytes == len(data)
    assert not leftovers(home)


def test_status_with_no_jobs_says_so(cli):
    result = cli("status")
    assert result.returncode == 0
    assert "no jobs" in result.stdout
    assert status_json(cli) == {"schema": 1, "jobs": []}
    waited = cli("wait")
    assert waited.returncode == 0 and "no jobs to wait for" in waited.stdout
    assert "no jobs" in cli("log").stdout


def test_status_table_json_log_and_clean(synth, origin, home, cli):
    registry, data = synth
    origin.rate = 400_000
    started = cli("get", "synth", "--registry", str(registry), "--connections", "1", "-b")
    assert started.returncode == 0, started.stderr
    job_id = job_id_from(started.stdout)
    poll(lambda: record(job_id).files[0].state == "downloading", what="the download to start")

    table = cli("status")
    assert table.returncode == 0
    header, row = table.stdout.splitlines()[:2]
    assert header.split() == ["JOB", "FILE", "STATE", "BYTES", "%", "SPEED", "ETA"]
    assert row.split()[:3] == [job_id, "synth.bin", "downloading"]
    assert "\x1b" not in table.stdout  # no colour off a terminal

    # `log -f` follows until the job ends, then exits by itself.
    follow = cli("log", "-f", job_id, timeout=60)
    assert follow.returncode == 0
    assert "synth.bin done" in follow.stdout
    assert record(job_id).state == "done"

    doc = status_json(cli, job_id)
    assert doc["schema"] == 1
    (job,) = doc["jobs"]
    assert job["id"] == job_id and job["state"] == "done" and job["exit_code"] == 0
    assert job["names"] == ["synth"] and job["log"].endswith(f"{job_id}.log")
    assert job["bytes"] == job["total"] == len(data)
    (f,) = job["files"]
    assert f["state"] == "done" and f["percent"] == 100.0 and f["bytes"] == len(data)
    assert set(f) == {"name", "dataset", "path", "state", "bytes", "total", "percent", "rate", "eta",
                      "exit_code", "error", "count"}
    assert f["count"] is None  # (a file, not a repo's entry)
    assert f["path"] == str(home / ".keras" / "datasets" / "synth.bin")

    # The log: plain lines, every progress line parses, a closing line with the verification.
    text = Path(job["log"]).read_text(encoding="utf-8")
    assert "\r" not in text and "\x1b" not in text
    progress = [line for line in text.splitlines() if " progress " in line]
    assert progress, text
    for line in progress:
        assert PROGRESS_LINE.match(line), line
    assert re.search(r"synth\.bin done .* in [\d.]+s, avg .*/s, sha256 ok", text)
    assert f"job {job_id} done exit=0" in text

    cleaned = cli("jobs", "clean")
    assert cleaned.returncode == 0 and job_id in cleaned.stdout
    assert not Path(job["log"]).exists()
    assert "no jobs" in cli("status").stdout


def test_wait_propagates_failure_exit_codes(synth, cli):
    registry, _ = synth
    missing = job_id_from(cli("get", "missing", "--registry", str(registry), "-b").stdout)
    badhash = job_id_from(cli("get", "badhash", "--registry", str(registry), "-b").stdout)

    result = cli("wait", missing, timeout=60)
    assert result.returncode == 3, result.stderr
    assert "404" in result.stderr
    result = cli("wait", badhash, timeout=60)
    assert result.returncode == 4, result.stderr
    assert "sha256" in result.stderr
    # Every job: the first failure's code, each failure reported.
    result = cli("wait", timeout=60)
    assert result.returncode == 3
    assert missing in result.stderr and badhash in result.stderr

    doc = status_json(cli)
    states = {j["id"]: (j["state"], j["exit_code"], j["files"][0]["state"]) for j in doc["jobs"]}
    assert states == {missing: ("failed", 3, "failed"), badhash: ("failed", 4, "failed")}
    table = cli("status").stdout
    assert "failed (exit 3)" in table and "failed (exit 4)" in table


def test_wait_timeout_cancel_and_resume(synth, origin, home, cli):
    registry, data = synth
    origin.rate = 150_000
    job_id = job_id_from(cli("get", "synth", "--registry", str(registry), "--connections", "1", "-b").stdout)
    poll(lambda: record(job_id).files[0].bytes > 0, what="bytes on disk")

    timed_out = cli("wait", job_id, "--timeout", "0.3")
    assert timed_out.returncode == 1
    assert "timed out" in timed_out.stderr
    assert record(job_id).state == "running"  # waiting gave up; the job did not

    cancelled = cli("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"prefetch resume {job_id}" in cancelled.stdout
    rec = record(job_id)
    assert rec.state == "cancelled" and rec.exit_code == 7
    assert rec.files[0].state == "cancelled"
    part = home / ".keras" / "datasets" / "synth.bin.part"
    assert part.exists()  # resumable state kept
    assert not (home / ".keras" / "datasets" / "synth.bin").exists()
    stopped = cli("wait", job_id)
    assert stopped.returncode == 7
    assert stopped.stderr.count("prefetch resume") == 1, stopped.stderr  # the hint, said once
    log = rec.log_path.read_text(encoding="utf-8")
    assert " synth.bin cancelled " in log and "failed exit=7" not in log, log

    origin.rate = None
    resumed = cli("resume", job_id)
    assert resumed.returncode == 0, resumed.stderr
    assert job_id_from(resumed.stdout) == job_id
    assert cli("wait", job_id, timeout=60).returncode == 0
    assert sha256_of(home / ".keras" / "datasets" / "synth.bin") == hashlib.sha256(data).hexdigest()
    last = origin.data_requests("synth.bin")[-1]
    assert last.range and not last.range.startswith("bytes=0-")  # continued from the bytes on disk
    rec = record(job_id)
    assert rec.state == "done" and rec.attempts == 2
    assert not leftovers(home)
    log = rec.log_path.read_text(encoding="utf-8")
    assert "cancelled exit=7" in log and "resumed (attempt 2)" in log


def test_fail_fast_is_recorded_and_stops_the_other_files(synth, origin, cli):
    registry, _ = synth
    origin.rate = 100_000
    job_id = job_id_from(cli("get", "synth", "missing", "--registry", str(registry), "--fail-fast", "-b").stdout)
    result = cli("wait", job_id, timeout=60)
    assert result.returncode == 3  # the cause, not the files it stopped
    rec = record(job_id)
    assert rec.fail_fast is True and "--fail-fast" in rec.command
    states = {f.name: f.state for f in rec.files}
    assert states == {"synth.bin": "interrupted", "nope.bin": "failed"}


def test_a_get_of_a_file_in_flight_waits_for_the_job_holding_it(synth, origin, home, cli):
    registry, data = synth
    origin.rate = 300_000
    job_id = job_id_from(cli("get", "synth", "--registry", str(registry), "--connections", "1", "-b").stdout)
    poll(lambda: record(job_id).files[0].state == "downloading", what="the job to hold the file")
    second = cli("get", "synth", "--registry", str(registry), timeout=60)
    assert second.returncode == 0, second.stderr
    assert f"job {job_id}" in second.stderr  # says whom it waits for
    assert second.stdout.split()[0] == "cached"
    assert sum(r.body_bytes_sent for r in origin.data_requests("synth.bin")) == len(data)
    assert cli("wait", job_id).returncode == 0


def test_four_concurrent_gets_make_one_transfer(synth, origin, home):
    registry, data = synth
    origin.rate = 600_000
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "prefetch", "get", "synth", "--registry", str(registry), "--connections", "1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=90) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
    statuses = sorted(out.split()[0] for out, _ in outputs)
    assert statuses == ["cached", "cached", "cached", "downloaded"]
    served = [r for r in origin.data_requests("synth.bin") if r.body_bytes_sent]
    assert sum(r.body_bytes_sent for r in served) == len(data)
    assert sha256_of(home / ".keras" / "datasets" / "synth.bin") == hashlib.sha256(data).hexdigest()


def test_bad_and_unknown_job_ids_and_a_corrupt_record(home, cli):
    for command in ("status", "log", "cancel", "resume"):
        bad = cli(command, "../etc")
        assert bad.returncode == 2, (command, bad.stderr)
        assert "invalid job id" in bad.stderr
        unknown = cli(command, "j0101-dead")
        assert unknown.returncode == 2
        assert "no job 'j0101-dead'" in unknown.stderr
    assert cli("wait", "j0101-dead").returncode == 2
    unknown = cli("wait", "j0000-zzzz")  # shaped like a job id: an unknown job, not an unknown dataset
    assert unknown.returncode == 2 and "no job 'j0000-zzzz'" in unknown.stderr, unknown.stderr

    jobs = home / ".prefetch" / "state" / "jobs"
    jobs.mkdir(parents=True)
    (jobs / "j0101-beef.json").write_text("{not json", encoding="utf-8")
    table = cli("status")
    assert table.returncode == 0, table.stderr
    assert "Traceback" not in table.stdout + table.stderr
    assert "j0101-beef" in table.stdout and "corrupt" in table.stdout
    (job,) = status_json(cli)["jobs"]
    assert job["state"] == "corrupt" and job["error"]
    resumed = cli("resume", "j0101-beef")
    assert resumed.returncode == 2 and "corrupt" in resumed.stderr
    assert "j0101-beef" in cli("jobs", "clean").stdout
    assert not (jobs / "j0101-beef.json").exists()


def test_get_background_usage_errors_start_nothing(synth, home, cli):
    registry, _ = synth
    result = cli("get", "nosuchdataset", "--registry", str(registry), "-b")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert status_json(cli)["jobs"] == []


def test_a_later_get_supersedes_a_cancelled_job_for_wait(synth, origin, home, cli):
    registry, data = synth
    origin.rate = 150_000
    job_id = job_id_from(cli("get", "synth", "--registry", str(registry), "--connections", "1", "-b").stdout)
    poll(lambda: record(job_id).files[0].bytes > 0, what="bytes on disk")
    assert cli("cancel", job_id).returncode == 0
    assert cli("wait").returncode == 7  # the stopped job's files are not in place

    origin.rate = None
    again = cli("get", "synth", "--registry", str(registry))  # as a user re-running the cell
    assert again.returncode == 0, again.stderr
    result = cli("wait")
    assert result.returncode == 0, result.stderr
    assert f"{job_id}: stopped earlier, but its files are in place now" in result.stdout
    table = cli("status")
    (row,) = [line for line in table.stdout.splitlines() if line.startswith(job_id)]
    assert " done " in row and "resume" not in table.stdout, table.stdout  # done, not "interrupted; resume"
    assert cli("wait", job_id).returncode == 7  # asked by id: its own outcome
    assert sha256_of(home / ".keras" / "datasets" / "synth.bin") == hashlib.sha256(data).hexdigest()


def test_liveness_pid_reuse_zombies_and_other_hosts(home):
    import socket

    from prefetch.jobs import JobRecord, process_start_time, refresh_state
    from prefetch.jobs.liveness import runs_worker_of

    def running(**kw) -> JobRecord:
        base = {"id": "j0101-abcd", "command": "prefetch get x -b", "request": {"names": ["x"]},
                "state": "running", "host": socket.gethostname(), "started": time.time(), "updated": time.time()}
        base.update(kw)
        return JobRecord(**base)

    # A live process whose command line is this job's worker (python -m prefetch.jobs.worker ID).
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m",
                               "prefetch.jobs.worker", "j0101-abcd"])
    try:
        me, my_start = worker.pid, poll(lambda: process_start_time(worker.pid), what="its start time")
        # (until it has exec'd, /proc shows the forking test's command line: no worker's yet)
        poll(lambda: runs_worker_of(me, "j0101-abcd"), what="its command line")
        assert refresh_state(running(pid=me, pid_start=my_start)).state == "running"
        # The same pid, but started at another time: a different process reusing the pid.
        reused = refresh_state(running(pid=me, pid_start=my_start - 1))
        assert reused.state == "interrupted" and reused.exit_code == 7
    finally:
        worker.kill()
        worker.wait()
    # A zombie (exited, not yet reaped) is not alive.
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    poll(lambda: Path(f"/proc/{child.pid}/stat").read_text().split(")")[-1].split()[0] == "Z", what="a zombie")
    assert refresh_state(running(pid=child.pid, pid_start=process_start_time(child.pid))).state == "interrupted"
    child.wait()
    # Another host sharing the state dir: judged by the record's heartbeat, not the pid
    # (a pid gone here keeps a fresh record running; a live one does not save a stale one).
    fresh = running(host="elsewhere", pid=child.pid, updated=time.time())
    assert refresh_state(fresh).state == "running"
    stale = running(host="elsewhere", pid=1, updated=time.time() - 3600)
    assert refresh_state(stale).state == "interrupted"
    # A cancel was asked for and the worker is gone: cancelled.
    gone = refresh_state(running(pid=child.pid, pid_start=1, cancel_requested=True))
    assert gone.state == "cancelled"


def test_every_request_field_survives_a_job_record():
    # A job stores its request as JSON and the worker rebuilds it, type-checking each field:
    # a field without a type (added to GetRequest later) must not fail every background job.
    from prefetch.flow.request import GetRequest

    request = GetRequest(names=["mnist"], urls=[{"url": "http://127.0.0.1/x.bin"}], include=["*.json"],
                         limit_rate="2M", seed="s3://bucket/prefix", force=True, nice=False)
    assert GetRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request
