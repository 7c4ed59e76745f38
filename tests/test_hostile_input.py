"""Hand-edited job records, bad input that used to end in a traceback, hostile archive member
names, sparse archives, environment overrides and mirror configs (issue 11, classes 5, 6, 7,
9 and 11)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from prefetch.errors import ExitCode
from tests.helpers import write_registry
from tests.test_bad_input import one_error_line
from tests.archives import tar_gz

DATA = random.Random(5).randbytes(100_000)
SHA = hashlib.sha256(DATA).hexdigest()


# --------------------------------------------------------------------------- class 5: job records


def jobs_dir(home: Path) -> Path:
    path = home / ".prefetch" / "state" / "jobs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def a_record(job_id: str, **changes) -> dict:
    record = {
        "id": job_id, "command": "prefetch get x -b", "request": {"names": ["x"]}, "state": "done",
        "pid": 12345, "pid_start": None, "host": os.uname().nodename, "started": time.time() - 60,
        "updated": time.time() - 30, "finished": time.time() - 30, "exit_code": 0, "error": None, "log": "",
        "fail_fast": False, "attempts": 1, "cancel_requested": False, "schema": 1,
        "files": [{"name": "x.bin", "dataset": "x", "path": "/tmp/x.bin", "state": "done", "bytes": 10,
                   "total": 10, "rate": 0.0, "eta": None, "exit_code": None, "error": None}],
    }
    record.update(changes)
    return record


BAD_FIELDS = [
    {"pid": "abc", "state": "running"},
    {"started": "yesterday"},
    {"files": [{"name": "x.bin", "dataset": "x", "path": "/tmp/x", "state": "done", "bytes": "10"}]},
    {"pid": True, "state": "running"},
    {"attempts": None},
    {"files": "nope"},
    {"request": ["x"]},
]


@pytest.mark.parametrize("bad", BAD_FIELDS, ids=lambda b: ",".join(b))
def test_a_wrong_typed_field_makes_one_corrupt_job_not_a_crash_for_all(home, cli, bad):
    jobs = jobs_dir(home)
    (jobs / "j0101-aaaa.json").write_text(json.dumps(a_record("j0101-aaaa")))
    (jobs / "j0101-bad0.json").write_text(json.dumps(a_record("j0101-bad0", **bad)))
    table = cli("status")
    assert table.returncode == 0, table.stderr
    assert "Traceback" not in table.stderr
    rows = {line.split()[0]: line for line in table.stdout.splitlines() if line.startswith("j0101")}
    assert "corrupt" in rows["j0101-bad0"] and "done" in rows["j0101-aaaa"]
    listed = json.loads(cli("status", "--json").stdout)["jobs"]
    assert {j["id"]: j["state"] for j in listed} == {"j0101-aaaa": "done", "j0101-bad0": "corrupt"}
    waited = cli("wait", "j0101-aaaa", timeout=30)
    assert waited.returncode == 0, waited.stderr
    for command in ("resume", "cancel"):
        proc = cli(command, "j0101-bad0", timeout=30)
        assert "Traceback" not in proc.stderr and proc.returncode in (0, 2), (command, proc.stderr)
    cleaned = cli("jobs", "clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not (jobs / "j0101-bad0.json").exists()


@pytest.mark.parametrize("pid_start", [None, "wrong"])
def test_cancel_never_signals_a_pid_without_proof_of_identity(home, cli, pid_start):
    """A 'running' record whose pid now belongs to an unrelated process: that process survives."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        from prefetch.jobs import process_start_time

        start = None if pid_start is None else process_start_time(bystander.pid) + 1
        jobs = jobs_dir(home)
        (jobs / "j0101-cccc.json").write_text(json.dumps(
            a_record("j0101-cccc", state="running", pid=bystander.pid, pid_start=start, finished=None,
                     exit_code=None, updated=time.time())))
        proc = cli("cancel", "j0101-cccc", timeout=60)
        assert "Traceback" not in proc.stderr
        time.sleep(0.5)
        assert bystander.poll() is None, "cancel signalled an unrelated process that reused the pid"
        state = json.loads(cli("status", "--json").stdout)["jobs"][0]["state"]
        assert state in ("cancelled", "interrupted")
    finally:
        bystander.kill()
        bystander.wait()


def test_cancel_signals_a_worker_proven_by_its_run_lock(home):
    """Without a start time (no /proc), the run lock the worker holds is the proof."""
    import fcntl

    from prefetch import jobs as jobs_mod

    jobs = jobs_dir(home)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         f"fd = os.open({str(jobs / 'j0101-dddd.run')!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        record = jobs_mod.record_from_dict(a_record("j0101-dddd", state="running", pid=holder.pid, pid_start=None))
        assert jobs_mod.worker_identity_proven(record)
        # A pid whose run lock nobody holds is not proven, even though the pid is alive.
        other = jobs_mod.record_from_dict(a_record("j0101-eeee", state="running", pid=holder.pid, pid_start=None))
        fd = os.open(jobs / "j0101-eeee.run", os.O_RDWR | os.O_CREAT, 0o600)
        os.close(fd)
        assert not jobs_mod.worker_identity_proven(other)
        assert fcntl  # the holder above uses it
    finally:
        holder.kill()
        holder.wait()


# --------------------------------------------------------------------------- class 6: no tracebacks


def test_url_file_name_longer_than_name_max(cli, origin, tmp_path):
    name = "a" * 300 + ".bin"
    line = one_error_line(cli("get", origin.url_for(name), "-q", cwd=tmp_path), ExitCode.USAGE)
    assert "file name too long" in line and "-o PATH" in line


def test_output_name_longer_than_name_max(cli, origin, tmp_path):
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / ("b" * 300)), "-q"),
                          ExitCode.USAGE)
    assert "file name too long" in line and "300 bytes" in line


def test_host_with_a_space(cli, tmp_path):
    line = one_error_line(cli("get", "http://bad host/x.bin", "-o", str(tmp_path / "x.bin")), ExitCode.USAGE)
    assert "the host 'bad host' contains a space" in line


def test_keras_home_with_an_unknown_user(cli):
    env = dict(os.environ, KERAS_HOME="~nosuchuser/x")
    line = one_error_line(cli("get", "mnist", env=env), ExitCode.USAGE)
    assert "KERAS_HOME='~nosuchuser/x'" in line and "no user 'nosuchuser'" in line


def test_malformed_proxy_variable(cli, origin, tmp_path):
    env = dict(os.environ, https_proxy="http://[::1")
    line = one_error_line(cli("get", "https://example.invalid/x.bin", "-o", str(tmp_path / "x.bin"), env=env),
                          ExitCode.USAGE)
    assert "https_proxy='http://[::1' is not a valid proxy URL" in line and "Invalid IPv6 URL" in line


def test_an_unexpected_exception_is_one_line_naming_the_traceback_file(home):
    """The last resort at the CLI boundary: a bug is reported in one line, the traceback kept in a file."""
    code = ("import prefetch.operations.listing as c, prefetch.cli as cli\n"
            "def boom(*a, **k):\n    raise RuntimeError('boom for the test')\n"
            "c.list_datasets = boom\ncli.main(['list'])\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    line = one_error_line(proc, ExitCode.FAILURE)
    assert "internal error (a bug in prefetch): RuntimeError: boom for the test" in line
    where = line.split("the full traceback was written to ")[1].split(";")[0]
    text = Path(where).read_text()
    assert "Traceback" in text and "boom for the test" in text
    assert Path(where).is_relative_to(home)  # under the state dir


# --------------------------------------------------------------------------- class 7: archives


@pytest.mark.parametrize("member", ["pkg.tar.gz", "pkg.tar.gz.part", "pkg.tar.gz.part.json", "other.bin.part",
                                    ".pkg.tar.gz.part.json.1-abcdef01.tmp", "alias.tar.gz"])
def test_a_member_named_like_prefetchs_own_files_cannot_replace_them(cli, home, origin, tmp_path, member):
    archive = tar_gz({"pkg/a.txt": b"A" * 100, member: b"evil bytes"})
    sha = hashlib.sha256(archive).hexdigest()
    origin.put("pkg.tar.gz", archive)
    reg = tmp_path / "r.toml"
    reg.write_text(f'[pkg]\n[[pkg.files]]\nurl = "{origin.url_for("pkg.tar.gz")}"\nsha256 = "{sha}"\n'
                   f'target = "pkg.tar.gz"\nalso = ["alias.tar.gz"]\nextract = ["."]\n')
    line = one_error_line(cli("get", "pkg", "--registry", str(reg), "-q", timeout=60), ExitCode.UNSAFE_ARCHIVE)
    assert repr(member) in line and "prefetch's" in line
    datasets = home / ".keras" / "datasets"
    for path in datasets.rglob("*"):
        if path.is_file():
            assert path.read_bytes() != b"evil bytes", path
    assert not (datasets / "pkg").exists()


def sparse_tar_gz(tmp_path: Path, size: int) -> bytes:
    src = tmp_path / "sparse-src"
    src.mkdir()
    with open(src / "big.bin", "wb") as fh:
        fh.seek(size - 5)
        fh.write(b"tail!")
    out = tmp_path / "sparse.tar.gz"
    subprocess.run(["tar", "--sparse", "--format=pax", "-czf", str(out), "-C", str(src), "big.bin"], check=True)
    return out.read_bytes()


def test_sparse_members_of_a_verified_archive_are_extracted(cli, home, origin, tmp_path):
    archive = sparse_tar_gz(tmp_path, 40 << 20)  # 40 MiB of holes in a few hundred bytes
    assert len(archive) * 200 < 40 << 20  # the ratio alone would call it a bomb
    origin.put("sp.tar.gz", archive)
    reg = write_registry(tmp_path / "r.toml", "sp", origin.url_for("sp.tar.gz"),
                         sha256=hashlib.sha256(archive).hexdigest(), target="sp.tar.gz", extract=["sp"])
    proc = cli("get", "sp", "--registry", str(reg), "-q", timeout=120)
    assert proc.returncode == 0, proc.stderr
    big = home / ".keras" / "datasets" / "sp" / "big.bin"
    assert big.stat().st_size == 40 << 20
    with open(big, "rb") as fh:
        fh.seek((40 << 20) - 5)
        assert fh.read() == b"tail!"
    assert big.stat().st_blocks * 512 < 1 << 20  # the holes stayed holes


def test_sparse_members_of_an_unverified_archive_still_count_whole(tmp_path):
    from prefetch.errors import UnsafeArchiveError
    from prefetch.archive.extract import extract_archive

    path = tmp_path / "sp.tar.gz"
    path.write_bytes(sparse_tar_gz(tmp_path, 40 << 20))
    with pytest.raises(UnsafeArchiveError):
        extract_archive(path, tmp_path / "out")
    result = extract_archive(path, tmp_path / "out2", verified=True)
    assert result.entries == ["big.bin"]
    with pytest.raises(UnsafeArchiveError):  # the full size still counts against max_bytes
        extract_archive(path, tmp_path / "out3", verified=True, max_bytes=10 << 20)


# --------------------------------------------------------------------------- class 9: environment overrides


def test_dataset_mirror_variable_never_replaces_an_explicit_url(cli, tmp_path):
    from tests.origin import OriginServer

    with OriginServer() as origin, OriginServer() as mirror:
        origin.put("releases/v2/model.bin", DATA)
        mirror.put("model.bin", b"the mirror's different model.bin")
        env = dict(os.environ, PREFETCH_DATASET_MIRROR=mirror.url_for(""))
        out = tmp_path / "model.bin"
        proc = cli("get", origin.url_for("releases/v2/model.bin"), "-o", str(out), "-q", env=env)
        assert proc.returncode == 0, proc.stderr
        assert out.read_bytes() == DATA
        assert mirror.data_requests("model.bin") == []
        # In the background too (the job pins the variable when it starts).
        out2 = tmp_path / "model2.bin"
        started = cli("get", origin.url_for("releases/v2/model.bin"), "-o", str(out2), "-b", env=env)
        assert started.returncode == 0, started.stderr
        waited = cli("wait", "--timeout", "60", env=env, timeout=90)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert out2.read_bytes() == DATA
        assert mirror.data_requests("model.bin") == []


def test_dataset_mirror_variable_still_serves_registry_datasets(cli, home, tmp_path):
    from tests.origin import OriginServer

    with OriginServer() as origin, OriginServer() as mirror:
        origin.put("d.bin", b"x")  # never asked
        mirror.put("d.bin", DATA)
        reg = write_registry(tmp_path / "r.toml", "d", origin.url_for("d.bin"), sha256=SHA, target="d.bin")
        env = dict(os.environ, PREFETCH_DATASET_MIRROR=mirror.url_for(""))
        proc = cli("get", "d", "--registry", str(reg), "-q", env=env)
        assert proc.returncode == 0, proc.stderr
        assert origin.data_requests("d.bin") == [] and mirror.data_requests("d.bin") != []


# --------------------------------------------------------------------------- class 11: mirror configs


def test_conda_custom_channels_are_merged_not_replaced(home, cli):
    condarc = home / ".condarc"
    condarc.write_text("channels:\n  - mylab\n  - defaults\ncustom_channels:\n"
                       "  mylab: https://conda.mylab.example/channels\n"
                       "  conda-forge: https://old.example/cloud\nssl_verify: true\n")
    env = dict(os.environ, HOME=str(home))
    done = cli("mirror", "use", "tuna", "--tool", "conda", env=env)
    assert done.returncode == 0, done.stderr
    text = condarc.read_text()
    assert "  mylab: https://conda.mylab.example/channels" in text
    assert "  conda-forge: https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud" in text
    assert "old.example" not in text and text.count("custom_channels:") == 1
    assert "ssl_verify: true" in text and "  - mylab" in text
    # Switching again keeps the user's channel, once.
    assert cli("mirror", "use", "bfsu", "--tool", "conda", env=env).returncode == 0
    assert condarc.read_text().count("mylab: https://conda.mylab.example/channels") == 1


# --------------------------------------------------------------------------- more instances found


def test_a_damaged_stored_request_is_one_line_on_resume(home, cli):
    jobs = jobs_dir(home)
    (jobs / "j0101-ffff.json").write_text(json.dumps(
        a_record("j0101-ffff", state="interrupted", exit_code=7, request={"names": "mnist", "cache_dir": 5})))
    line = one_error_line(cli("resume", "j0101-ffff"), ExitCode.USAGE)
    assert "stored request is corrupt" in line


def test_a_hand_edited_lock_owner_file_does_not_crash_the_waiting_message(tmp_path):
    from prefetch.fs.locks import lock_path, read_owner

    path = lock_path(tmp_path, tmp_path / "x.bin")
    path.with_suffix(".owner").write_text(json.dumps(
        {"pid": 1, "host": "h", "started": "yesterday", "target": "x", "job": None}))
    assert read_owner(path) is None
    path.with_suffix(".owner").write_text(json.dumps(
        {"pid": 1, "host": "h", "started": 1.0, "target": "x", "job": None}))
    assert read_owner(path).describe().startswith("pid 1 on h")


@pytest.mark.parametrize("where", ["registry", "mirrors.toml"])
def test_a_fifo_given_as_a_registry_or_catalog_does_not_block(home, cli, tmp_path, where):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    if where == "registry":
        proc = cli("get", "mnist", "--registry", str(fifo), timeout=60)
    else:
        config = home / ".prefetch" / "config"
        config.mkdir(parents=True)
        os.mkfifo(config / "mirrors.toml")
        proc = cli("mirror", "list", timeout=60)
    line = one_error_line(proc, ExitCode.USAGE)
    assert "FIFO" in line


def test_a_running_worker_holds_its_run_lock_and_cancel_uses_it(home, cli, origin, tmp_path):
    """The proof of identity exists for real workers: the lock is held while it runs, free after."""
    from prefetch.jobs import run_lock_held
    from tests.origin import StallAfter

    origin.put("slow.bin", DATA)
    origin.add_fault(StallAfter(1000, 30, path="slow.bin"))
    started = cli("get", origin.url_for("slow.bin"), "-o", str(tmp_path / "slow.bin"), "-b", "--connections", "1")
    assert started.returncode == 0, started.stderr
    job = json.loads(cli("status", "--json").stdout)["jobs"][0]["id"]
    deadline = time.monotonic() + 30
    while run_lock_held(job) is not True:
        assert time.monotonic() < deadline, "the worker never took its run lock"
        time.sleep(0.05)
    # Without the start time (as where /proc is missing), cancel still finds its worker by the lock.
    from prefetch.jobs import update_record

    update_record(job, lambda rec: setattr(rec, "pid_start", None))
    cancelled = cli("cancel", job, timeout=60)
    assert cancelled.returncode in (0, 7), cancelled.stderr
    assert json.loads(cli("status", "--json").stdout)["jobs"][0]["state"] == "cancelled"
    deadline = time.monotonic() + 30
    while run_lock_held(job) is not False:
        assert time.monotonic() < deadline, "the run lock outlived its worker"
        time.sleep(0.05)


def test_a_redirect_to_a_host_with_a_space_is_one_line(cli, origin, tmp_path):
    from tests.origin import Redirect

    origin.add_fault(Redirect("http://bad host/x.bin", path="d.bin"))
    proc = cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), "-q", timeout=60)
    line = one_error_line(proc, ExitCode.NETWORK)
    assert "the host 'bad host' contains a space" in line
