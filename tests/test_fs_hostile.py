"""A hostile review of the local filesystem: names that are not what they seem, files changed
under a running download, a state dir that fills up while a job runs.

Real CLI processes (or the real API in-process), the real origin on 127.0.0.1; a full disk is
a real small tmpfs (``tests/test_disk.py``'s ``Tmpfs``; the suite runs as root in CI).
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from prefetch.errors import ExitCode
from prefetch.model.events import EventKind
from tests.test_bad_input import one_error_line
from tests.test_disk import Tmpfs

MiB = 1 << 20


def test_a_dangling_symlink_at_the_output_name_is_refused_before_any_byte(cli, origin, tmp_path):
    """A link the user (or anyone) left at the name, pointing nowhere: refused up front, as a link
    to a file is, not after the whole download (which was then left behind as a ``.part``)."""
    origin.put("big.bin", random.Random(1).randbytes(2 * MiB))
    out = tmp_path / "out"
    out.mkdir()
    (out / "big.bin").symlink_to(tmp_path / "nowhere" / "big.bin")
    for args in (["-o", str(out / "big.bin")], ["-P", str(out)]):
        line = one_error_line(cli("get", origin.url_for("big.bin"), *args, "-q"), ExitCode.FILESYSTEM)
        assert "refusing to use" in line and "symbolic link" in line, line
    assert origin.data_requests("big.bin") == []
    assert sorted(p.name for p in out.iterdir()) == ["big.bin"]  # the link, untouched; no .part
    assert os.readlink(out / "big.bin") == str(tmp_path / "nowhere" / "big.bin")


def test_a_part_replaced_by_another_process_mid_download_is_never_placed(home, origin, tmp_path):
    """Without a hash to catch it, a ``.part`` swapped for another file while the download writes
    into the old one would be renamed into place holding the other file's bytes, exit 0."""
    def swap(part) -> None:
        other = tmp_path / "other"
        other.write_bytes(b"\0" * (4 * MiB))
        os.replace(other, part)  # another process's file at the name; ours keeps being written

    error = tamper_mid_download(origin, tmp_path, "swap.bin", swap, seed=2)
    assert error.exit_code in (ExitCode.FILESYSTEM, ExitCode.INTEGRITY), error
    assert "replaced" in str(error), error


def tamper_mid_download(origin, tmp_path, name: str, tamper, *, seed: int, connections: int = 1,
                        after: int = 0):
    """``name`` (4 MiB from ``origin`` at 2 MB/s) fetched with the API into ``tmp_path/out``,
    ``tamper(part)`` run once (another process at the ``.part``) at the first progress past
    ``after`` bytes. Checks that it ran, that nothing was placed and that a rerun brings the file
    whole; returns the run's PrefetchError."""
    import prefetch
    from prefetch.errors import PrefetchError

    data = random.Random(seed).randbytes(4 * MiB)
    origin.put(name, data)
    origin.rate = 2_000_000
    out = tmp_path / "out"
    part = out / f"{name}.part"
    done = []

    def hook(event) -> None:
        if not done and event.kind == EventKind.PROGRESS and event.done and event.done > after and part.exists():
            tamper(part)
            done.append(event.done)

    with pytest.raises(PrefetchError) as caught:
        prefetch.ensure(origin.url_for(name), output_dir=str(out), connections=connections, on_event=hook,
                        progress=False)
    assert done
    assert not (out / name).exists()
    origin.rate = None
    results = prefetch.ensure(origin.url_for(name), output_dir=str(out), progress=False)
    assert [r.status for r in results] == ["downloaded"]
    assert (out / name).read_bytes() == data  # the rerun trusted none of the tampered bytes
    return caught.value


def _fill(path: Path) -> None:
    """Append to ``path`` until the filesystem says no (the file's last page is filled too)."""
    with open(path, "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\n" * 4096)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\n")
        except OSError:
            pass


def test_a_job_keeps_downloading_when_its_state_dir_fills_up(cli, home, origin, tmp_path, monkeypatch):
    """PREFETCH_HOME on a small root disk that fills up (a pip install beside the job), the data
    on another disk: the job's log and record cannot grow, the download must not die of it."""
    from tests.test_jobs import job_id_from

    fs = Tmpfs(tmp_path / "state").mount(size="1m")
    try:
        monkeypatch.setenv("PREFETCH_HOME", str(fs.path / "prefetch"))
        data = random.Random(3).randbytes(2 * MiB)
        origin.put("slow.bin", data)
        origin.rate = 600_000
        out = tmp_path / "out"
        started = cli("get", origin.url_for("slow.bin"), "-P", str(out), "-b")
        assert started.returncode == 0, started.stderr
        job = job_id_from(started.stdout)
        log = fs.path / "prefetch" / "state" / "jobs" / f"{job}.log"
        deadline = time.monotonic() + 30
        while not (out / "slow.bin.part").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        _fill(fs.path / "fill")  # no room for a new page: the record's rewrite fails...
        _fill(log)  # ...and so does the log's next line
        waited = cli("wait", job, timeout=60)
        assert (out / "slow.bin").read_bytes() == data
        assert "Traceback" not in log.read_text(errors="replace")
        # Its end is recorded all the same (over the record's own blocks): done, not "interrupted".
        assert waited.returncode == 0 and f"{job} done" in waited.stdout, (waited.stdout, waited.stderr)
        status = cli("status", job)
        assert status.returncode == 0 and "done" in status.stdout and "interrupted" not in status.stdout
    finally:
        fs.unmount()


def test_an_output_dir_that_is_a_link_pointing_nowhere_is_named_as_such(cli, origin, tmp_path):
    """``-P data`` where ``data`` links to a volume not mounted (yet): the line says so, not
    'cannot write data: File exists'."""
    origin.put("a.bin", b"a" * 1000)
    (tmp_path / "data").symlink_to(tmp_path / "mnt" / "workspace" / "data")
    line = one_error_line(cli("get", origin.url_for("a.bin"), "-P", str(tmp_path / "data"), "-q"),
                          ExitCode.FILESYSTEM)
    assert "symbolic link to" in line and "does not exist" in line, line
    assert origin.data_requests("a.bin") == []
    assert not (tmp_path / "mnt").exists()  # never created through the link


def test_a_disk_filled_by_another_process_after_the_part_is_reserved(home, origin, tmp_path):
    """The ``.part`` has its room (preallocated); something else then takes the rest of the disk:
    the resume record's rewrite has no room for a new file, but fits over its own bytes, so the
    download completes instead of stopping with 'no space left' at a file that had its room."""
    data = random.Random(4).randbytes(4 * MiB)
    origin.put("room.bin", data)
    origin.rate = 1_500_000
    fs = Tmpfs(tmp_path / "disk").mount(size="8m")
    try:
        from tests.helpers import start_cli

        proc = start_cli("get", origin.url_for("room.bin"), "-P", str(fs.path), "--connections", "1", "-q",
                         stdout=-1, stderr=-1, text=True)
        record = fs.path / "room.bin.part.json"
        deadline = time.monotonic() + 30
        while not record.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert record.exists()
        _fill(fs.path / "fill")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert (fs.path / "room.bin").read_bytes() == data
    finally:
        fs.unmount()


def test_mirror_use_on_a_full_disk_says_so_and_leaves_the_config(home, monkeypatch, tmp_path):
    """A full disk is not a permission problem: the line says to free space, the config is as it was."""
    from tests.conftest import run_cli
    from tests.mirror_helpers import isolate_tool_env, pip_user_conf

    env = isolate_tool_env(monkeypatch, home)
    conf = pip_user_conf(home)
    fs = Tmpfs(conf.parent).mount(size="64k")
    try:
        original = b"[global]\ntimeout = 5\n"
        conf.write_bytes(original)
        _fill(fs.path / "fill")
        _fill(conf.parent / "pad")
        line = one_error_line(run_cli("mirror", "use", "tuna", "--tool", "pip", env=env), ExitCode.FILESYSTEM)
        assert "no space left" in line.lower() and "free some space" in line, line
        assert conf.read_bytes() == original
    finally:
        fs.unmount()


@pytest.mark.parametrize("bulk", ["1", "0"])
def test_a_disk_that_fills_during_a_list_is_a_full_disk_not_a_bad_download(cli, origin, tmp_path, bulk):
    """``pwrite`` on a nearly full disk writes what fits and returns the count (the error comes
    with the next call): a short write ignored left a hole, reported as 'holds 8192 bytes, the
    download 16384' (exit 4, integrity), and had room come back before the next write, the file
    would have been placed with a hole of zeros and no hash to see it."""
    rng = random.Random(5)
    files = {f"f{i}.bin": rng.randbytes(16384) for i in range(20)}
    for name, body in files.items():
        origin.put(name, body)
    listing = tmp_path / "list.txt"
    listing.write_text("".join(origin.url_for(name) + "\n" for name in files))
    fs = Tmpfs(tmp_path / "small").mount(size="200k")
    try:
        env = {**os.environ, "PREFETCH_BULK": bulk}
        done = cli("get", "-i", str(listing), "-P", str(fs.path), "-q", env=env)
        assert done.returncode == ExitCode.FILESYSTEM, (done.returncode, done.stderr)
        errors = done.stderr.strip().splitlines()
        assert errors and all("no space left" in line or "failed the same way" in line for line in errors), done.stderr
        assert "no space left" in errors[0], done.stderr
        assert "0.0 MiB" not in done.stderr  # (a small file's need and what is free, in KiB)
        fs.remount("size=2m")
        again = cli("get", "-i", str(listing), "-P", str(fs.path), "-q", env=env)
        assert again.returncode == 0, again.stderr
        for name, body in files.items():
            assert (fs.path / name).read_bytes() == body, name
        assert sorted(p.name for p in fs.path.iterdir()) == sorted(files)
    finally:
        fs.unmount()


def test_a_full_state_disk_does_not_stop_a_download_to_another_disk(cli, home, origin, tmp_path, monkeypatch):
    """PREFETCH_HOME on the small root disk, full; the data goes to a roomy workspace disk. The
    lock's owner record (a courtesy: who holds it) cannot be written, the lock itself needs no
    room: the download goes on."""
    fs = Tmpfs(tmp_path / "root").mount(size="1m")
    try:
        monkeypatch.setenv("PREFETCH_HOME", str(fs.path / "prefetch"))
        origin.put("first.bin", b"1" * 5000)
        data = random.Random(6).randbytes(300_000)
        origin.put("second.bin", data)
        out = tmp_path / "workspace"
        assert cli("get", origin.url_for("first.bin"), "-P", str(out), "-q").returncode == 0  # (the state dir made)
        _fill(fs.path / "fill")
        done = cli("get", origin.url_for("second.bin"), "-P", str(out), "-q")
        assert done.returncode == 0, done.stderr
        assert (out / "second.bin").read_bytes() == data
    finally:
        fs.unmount()


def test_a_folder_name_too_long_in_a_list_is_bad_input_before_anything(cli, origin, tmp_path):
    """``out=sub/<300 bytes>/x.bin``: exit 2 before any download or folder, as a file name too
    long already is (not exit 5 'File name too long' once ``sub`` was made and others fetched)."""
    origin.put("a.bin", b"a" * 100)
    origin.put("b.bin", b"b" * 100)
    listing = tmp_path / "list.txt"
    listing.write_text(f"{origin.url_for('a.bin')} out=sub/{'d' * 300}/x.bin\n{origin.url_for('b.bin')}\n")
    out = tmp_path / "out"
    line = one_error_line(cli("get", "-i", str(listing), "-P", str(out), "-q"), ExitCode.USAGE)
    assert "folder name too long" in line and "300 bytes" in line, line
    assert not out.exists()
    assert origin.data_requests("a.bin") == origin.data_requests("b.bin") == []


def test_an_archive_member_path_too_long_is_one_short_line(cli, origin, tmp_path):
    """A member path of 25 folders of 200 bytes: exit 5 saying so, in a line a notebook can show
    (it held the whole 5,000-byte path), nothing extracted, the download kept."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("/".join(["d" * 200] * 25) + "/x.txt")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    origin.put("deep.tar.gz", buf.getvalue())
    out = tmp_path / "out"
    line = one_error_line(cli("get", origin.url_for("deep.tar.gz"), "--extract", "-P", str(out), "-q"),
                          ExitCode.FILESYSTEM)
    assert "longer than this filesystem allows" in line and len(line) < 600, line
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("deep.tar.gz")) == []
    assert [p.name for p in tmp_path.iterdir() if "extract" in p.name] == []  # its temp folder gone


def test_a_job_whose_record_cannot_be_written_at_its_end_says_so_in_one_line(cli, home, origin, tmp_path):
    """The record made immutable (``chattr +i``) while the job runs: its end cannot be recorded.
    The log says so in one line; it is not an internal error with a traceback (finish raised,
    run_job took it for a bug and called finish again, which raised again)."""
    import subprocess

    from tests.test_jobs import job_id_from

    origin.put("slow.bin", random.Random(7).randbytes(1 * MiB))
    origin.rate = 700_000
    out = tmp_path / "out"
    started = cli("get", origin.url_for("slow.bin"), "-P", str(out), "-b")
    job = job_id_from(started.stdout)
    jobs = Path(os.environ["PREFETCH_HOME"]) / "state" / "jobs"
    record = jobs / f"{job}.json"
    deadline = time.monotonic() + 30
    while not (out / "slow.bin.part").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    made = subprocess.run(["chattr", "+i", str(record)], capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"chattr +i is not supported here: {made.stderr.strip()}")
    try:
        cli("wait", job, timeout=60)  # (returns once the worker has gone)
    finally:
        subprocess.run(["chattr", "-i", str(record)], capture_output=True)
    assert (out / "slow.bin").stat().st_size == 1 * MiB
    log = (jobs / f"{job}.log").read_text()
    assert "Traceback" not in log and "internal error" not in log, log
    assert "could not record its end (done, exit 0)" in log, log


def test_a_job_log_says_how_many_lines_a_full_disk_dropped(tmp_path):
    """The job's log on a real full tmpfs: lines the disk refuses are dropped without an error, and
    the first line written once there is room again is preceded by one saying how many and why."""
    from prefetch.jobs.log_file import JobLog

    fs = Tmpfs(tmp_path / "state").mount(size="64k")
    try:
        path = fs.path / "job.log"
        log = JobLog(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
        log.write("first\n")
        _fill(fs.path / "fill")
        _fill(path)  # (its last page too)
        log.write("dropped 1\n")
        log.write("dropped 2\n")
        (fs.path / "fill").unlink()
        log.write("after\n")
        log.close()
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        assert lines[0] == "first"
        assert lines[-2].endswith("log: 2 line(s) before this one not written (No space left on device)"), lines[-2:]
        assert lines[-1] == "after"
    finally:
        fs.unmount()
