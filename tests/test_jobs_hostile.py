"""A hostile review of job state: records and logs planted or torn, read by the real CLI.

A shared PREFETCH_HOME (another uid, another host) or a torn write can leave anything
at a record's or a log's name. ``status``, ``wait`` and ``log`` must answer with one
line and an exit code, never a traceback, never hang, and ``status --json`` must stay
JSON that any parser reads.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest


def plant(home: Path, job_id: str, **fields) -> Path:
    """Write a job record by hand (raw text when ``raw`` is given)."""
    jobs = home / ".prefetch" / "state" / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    path = jobs / f"{job_id}.json"
    raw = fields.pop("raw", None)
    if raw is None:
        record = {"id": job_id, "command": "get x", "request": {"names": ["x"]}, "state": "done",
                  "exit_code": 0, "started": time.time(), "updated": time.time(),
                  "files": [{"name": "a.bin", "dataset": "x", "path": "/nonexistent/a.bin",
                             "state": "done", "bytes": 10, "total": 10}]}
        record.update(fields)
        raw = json.dumps(record)
    path.write_text(raw, encoding="utf-8")
    return path


def strict_json(text: str):
    """Parse as RFC 8259 JSON: NaN and Infinity (Python's extension) are refused."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def no_crash(result) -> None:
    assert "internal error" not in result.stderr, result.stderr
    assert "Traceback" not in result.stderr, result.stderr


def assert_listed_corrupt(cli) -> None:
    """`status` and `status --json` (strict JSON) show the one planted job as corrupt, no crash."""
    status = cli("status")
    no_crash(status)
    assert status.returncode == 0, status.stderr
    assert "corrupt" in status.stdout
    as_json = cli("status", "--json")
    no_crash(as_json)
    assert [j["state"] for j in strict_json(as_json.stdout)["jobs"]] == ["corrupt"]


def running_elsewhere(**file_fields) -> dict:
    """A record a live worker on another host (a shared state dir) just wrote."""
    other = "not-" + socket.gethostname()
    f = {"name": "a.bin", "dataset": "x", "path": "/nonexistent/a.bin", "state": "downloading",
         "bytes": 5, "total": 10, "rate": 1.0, "eta": 5.0}
    f.update(file_fields)
    return {"state": "running", "exit_code": None, "pid": 12345, "host": other, "files": [f]}


@pytest.mark.parametrize("raw_number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_in_a_record(home, cli, raw_number):
    """A record with NaN or Infinity (Python writes and reads them; JSON has none) is corrupt:
    `status` crashed on an ETA of NaN, `status --json` printed NaN/Infinity, which no JSON
    parser but Python's reads."""
    record = running_elsewhere(rate=0.123456, eta=7.654321)
    text = json.dumps({"id": "j1126-nan1", "command": "get x", "request": {"names": ["x"]},
                       "started": time.time(), "updated": time.time(), **record})
    text = text.replace("7.654321", raw_number).replace("0.123456", raw_number)
    plant(home, "j1126-nan1", raw=text)
    assert_listed_corrupt(cli)

    waited = cli("wait", "j1126-nan1", timeout=30)
    no_crash(waited)
    assert waited.returncode == 1 and len(waited.stderr.strip().splitlines()) == 1, waited.stderr


@pytest.mark.parametrize("field,value", [("bytes", 10**400), ("total", 10**400), ("bytes", -5),
                                         ("total", -1)], ids=["bytes-huge", "total-huge",
                                                                           "bytes-negative", "total-negative"])
def test_out_of_range_sizes_in_a_record(home, cli, field, value):
    """A byte count no file has (10**400: `status` crashed with OverflowError; negative:
    shown as -5B) makes the record corrupt, not a crash or a nonsense row."""
    files = [{"name": "a.bin", "dataset": "x", "path": "/nonexistent/a.bin", "state": "done",
              "bytes": 10, "total": 10}]
    files[0][field] = value
    plant(home, "j1126-big1", files=files)
    assert_listed_corrupt(cli)
    waited = cli("wait", "j1126-big1", timeout=30)
    no_crash(waited)
    assert waited.returncode == 1


def test_a_fifo_at_the_log_name_is_refused_not_waited_on(home, cli):
    """`prefetch log JOB` with a FIFO planted at jobs/JOB.log (a shared state dir) hung
    forever in open(); now one line and an exit code, at once."""
    plant(home, "j1126-fifo")
    log = home / ".prefetch" / "state" / "jobs" / "j1126-fifo.log"
    os.mkfifo(log)
    result = cli("log", "j1126-fifo", timeout=30)
    no_crash(result)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "FIFO" in lines[0], result.stderr


def test_a_record_whose_log_names_a_device_is_refused(home, cli):
    """A record whose ``log`` names /dev/zero: `prefetch log` read it until memory ran out."""
    plant(home, "j1126-zero", log="/dev/zero")
    result = cli("log", "j1126-zero", timeout=30)
    no_crash(result)
    assert result.returncode != 0
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_symlink_at_the_log_name_is_not_followed(home, cli, tmp_path):
    """Another user's link at jobs/JOB.log pointing at a file of ours: `log` does not print
    what it points to (prefetch never writes a log through a link either)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    plant(home, "j1126-link")
    (home / ".prefetch" / "state" / "jobs" / "j1126-link.log").symlink_to(secret)
    result = cli("log", "j1126-link", timeout=30)
    no_crash(result)
    assert "TOP SECRET" not in result.stdout
    assert result.returncode != 0 and len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("request_text", ['{}', '{"bogus": 1}'], ids=["empty", "no-names"])
def test_resume_of_a_record_whose_request_is_torn(home, cli, request_text):
    """`resume` of a stopped job whose stored request lost its names crashed (internal error:
    GetRequest.__init__() missing 'names'). One line now."""
    record = {"id": "j1126-req1", "command": "get synth", "state": "interrupted", "exit_code": 7,
              "started": time.time(), "updated": time.time(), "files": []}
    text = json.dumps(record)[:-1] + f', "request": {request_text}}}'
    plant(home, "j1126-req1", raw=text)
    result = cli("resume", "j1126-req1", timeout=60)
    no_crash(result)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "stored request is corrupt" in lines[0], result.stderr


@pytest.mark.parametrize("field,value", [("timeout", float("nan")), ("limit_rate", float("inf")),
                                         ("timeout", float("-inf"))])
def test_a_stored_request_with_nan_or_infinity_is_corrupt(field, value):
    """Python's json reads NaN and Infinity from a record; no request field means them, and a
    resumed worker would have been handed a NaN timeout."""
    from prefetch.errors import UsageError
    from prefetch.flow.request import GetRequest

    with pytest.raises(UsageError, match="stored request is corrupt"):
        GetRequest.from_dict({"names": ["synth"], field: value})
    assert GetRequest.from_dict({"names": ["synth"], field: 3.5}).names == ["synth"]


def test_a_record_naming_a_live_process_that_is_no_worker(home, cli):
    """A 'running' record with the pid and start time of a live process of ours that is not
    this job's worker (planted in a shared state dir, or left from before a reboot where the
    pid and start tick came round again): `cancel` sent it SIGTERM (a notebook kernel, say)
    and `status` showed the job running for as long as that process lived (`wait` hung)."""
    import subprocess
    import sys

    from prefetch.fs.processes import process_start_time

    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        start = process_start_time(bystander.pid)
        assert start is not None
        plant(home, "j1126-kill", state="running", exit_code=None, pid=bystander.pid, pid_start=start,
              host=socket.gethostname(), files=[])
        status = cli("status", "--json")
        assert [j["state"] for j in json.loads(status.stdout)["jobs"]] == ["interrupted"], status.stdout
        cancelled = cli("cancel", "j1126-kill", timeout=60)
        no_crash(cancelled)
        assert cancelled.returncode == 0, cancelled.stderr
        waited = cli("wait", "j1126-kill", timeout=60)
        assert waited.returncode == 7, waited.stderr
        assert bystander.poll() is None, "cancel signalled a process that is no worker of the job"
    finally:
        bystander.kill()
        bystander.wait()


@pytest.fixture
def full_state_dir(tmp_path, monkeypatch):
    """PREFETCH_HOME on a real 64 KiB tmpfs, filled to the last byte (root only: CI's suite)."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (CI runs the suite as root)")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        home = mount / "home"
        monkeypatch.setenv("PREFETCH_HOME", str(home))
        yield home
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path) -> None:
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (4096, 1):
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)


def test_a_full_disk_while_a_job_record_is_written(home, cli, full_state_dir, tmp_path):
    """The state dir's disk is full: `get -b` and `resume` said 'internal error (a bug in
    prefetch): OSError: [Errno 28]'. Now one line naming the disk, exit 5; nothing half
    written is left as a record."""
    jobs = full_state_dir / "state" / "jobs"
    jobs.mkdir(parents=True)
    target = tmp_path / "y.bin"
    (jobs / "j1126-full.json").write_text(json.dumps({
        "id": "j1126-full", "command": "get", "request": {"names": ["http://127.0.0.1:9/y.bin"],
                                                          "output": str(target)},
        "state": "interrupted", "exit_code": 7, "started": time.time(), "updated": time.time(),
        "files": []}))
    fill(full_state_dir.parent)

    started = cli("get", "http://127.0.0.1:9/y.bin", "-o", str(target), "-b", timeout=60)
    resumed = cli("resume", "j1126-full", timeout=60)
    for result in (started, resumed):
        no_crash(result)
        assert result.returncode == 5, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "no space left" in lines[0], result.stderr
    assert sorted(p.name for p in jobs.iterdir() if p.suffix == ".json") == ["j1126-full.json"]
    assert not target.exists()


@pytest.mark.parametrize("field,value", [("rate", -100.0), ("eta", -1e300)])
def test_a_negative_rate_or_eta_in_a_running_record(home, cli, field, value):
    """A live-looking record (another host's, fresh) with a negative speed or ETA: `status`
    showed '-100B/s' and an ETA of 300 digits. The worker never writes either below zero."""
    record = running_elsewhere(**{field: value})
    plant(home, "j1126-neg1", **record)
    status = cli("status", "--json")
    no_crash(status)
    assert [j["state"] for j in strict_json(status.stdout)["jobs"]] == ["corrupt"], status.stdout
    table = cli("status")
    assert table.returncode == 0 and "corrupt" in table.stdout and "-100B/s" not in table.stdout


def test_the_worker_never_writes_what_readers_call_corrupt(home):
    """A rate window over a file that restarted from zero gives a negative rate; NaN and
    Infinity can come out of a division. The record written is still one readers accept."""
    from prefetch.jobs import FileStatus, JobRecord, load_record, write_record

    files = [FileStatus(name=n, dataset="x", path=f"/nonexistent/{n}", state="downloading", bytes=1,
                        total=10, rate=rate, eta=eta)
             for n, rate, eta in [("a", -5.0, -1.0), ("b", float("nan"), float("inf")), ("c", 2.0, 4.5)]]
    write_record(JobRecord(id="j1126-wrt1", command="get x", request={"names": ["x"]}, files=files))
    back = load_record("j1126-wrt1")
    assert [(f.rate, f.eta) for f in back.files] == [(0.0, None), (0.0, None), (2.0, 4.5)]


@pytest.mark.parametrize("command", ["wait", "cancel"])
@pytest.mark.parametrize("timeout", ["nan", "-1"])
def test_a_timeout_of_nan_or_below_zero_is_bad_input(home, cli, command, timeout):
    """`wait --timeout nan` on a running job never gave up (no deadline is ever passed by
    NaN); `--timeout -1` said 'timed out after -1s'. Both are bad input: one line, exit 2."""
    plant(home, "j1126-tmo1", **running_elsewhere())
    result = cli(command, "--timeout", timeout, "j1126-tmo1", timeout=30)
    no_crash(result)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "invalid timeout" in lines[0], result.stderr


def test_a_job_named_twice_to_wait_is_reported_once(home, cli):
    plant(home, "j1127-d0d0")
    result = cli("wait", "j1127-d0d0", "j1127-d0d0", timeout=30)
    no_crash(result)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("j1127-d0d0") == 1, result.stdout
