"""The local filesystem says no: disk full, unwritable and read-only dirs, unusual names.

Disk-full tests use a real small tmpfs (``mount -t tmpfs -o size=...``); read-only
directories are read-only mounts, because the suite runs as root and root ignores file
permission bits. Where mounting is not permitted the tmpfs tests are skipped, saying why.
Every failure must be exit 5 with one `prefetch: error:` line and a resumable state.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from prefetch.errors import ExitCode
from tests.archives import tar_gz
from tests.helpers import start_cli, write_registry
from tests.origin import OriginServer
from tests.test_bad_input import one_error_line
from tests.test_faults import recorded_bytes

MiB = 1 << 20


class Tmpfs:
    """A tmpfs mounted on a fresh directory; unmounted at teardown."""

    def __init__(self, where: Path) -> None:
        self.path = where

    def mount(self, *, size: str, read_only: bool = False) -> "Tmpfs":
        self.path.mkdir(parents=True, exist_ok=True)
        options = f"size={size},mode=0755" + (",ro" if read_only else "")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(self.path)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"mounting a tmpfs is not permitted here ({proc.stderr.strip() or proc.returncode}); "
                        "the disk-full and read-only tests need a real small filesystem")
        return self

    def remount(self, options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(self.path)], check=True, capture_output=True)

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], capture_output=True)

    def free(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize


@pytest.fixture
def tmpfs(tmp_path):
    mounts: list[Tmpfs] = []

    def make(size: str, *, read_only: bool = False, name: str | None = None) -> Tmpfs:
        fs = Tmpfs(tmp_path / (name or f"fs-{uuid.uuid4().hex[:6]}")).mount(size=size, read_only=read_only)
        mounts.append(fs)
        return fs

    yield make
    for fs in reversed(mounts):
        fs.unmount()


@pytest.fixture
def origin():
    with OriginServer() as server:
        yield server


def get(cli, url: str, out: Path, *extra: str, sha256: str | None = None):
    args = ["get", url, "-o", str(out), "-q", *extra]
    if sha256:
        args += ["--sha256", sha256]
    return cli(*args)


def strays(directory: Path, allowed: set[str]) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name not in allowed)


# --------------------------------------------------------------------------- disk full


def test_disk_full_says_how_much_is_needed_then_resumes(cli, origin, tmpfs):
    data = random.Random(1).randbytes(3 * MiB)
    sha = hashlib.sha256(data).hexdigest()
    origin.put("big.bin", data)
    fs = tmpfs("2m")
    out = fs.path / "big.bin"
    line = one_error_line(get(cli, origin.url_for("big.bin"), out, sha256=sha), ExitCode.FILESYSTEM)
    assert "no space left" in line
    assert "needs 3.0 MiB more" in line and "free" in line  # how much is needed, how much there is
    assert "--cache-dir" in line  # what to do
    assert not out.exists()

    fs.remount("size=8m")
    proc = get(cli, origin.url_for("big.bin"), out, sha256=sha)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    assert strays(fs.path, {"big.bin"}) == []


def test_disk_filling_up_mid_download_keeps_the_part_and_resumes(cli, origin, tmpfs):
    data = random.Random(2).randbytes(2 * MiB + 12345)
    sha = hashlib.sha256(data).hexdigest()
    origin.put("fill.bin", data)
    origin.rate = 1_000_000
    fs = tmpfs("4m")
    out = fs.path / "fill.bin"
    # (without preallocation: a reserved .part has its room, and its resume record is rewritten
    # over its own bytes, so a disk filled later would not stop it: tests/test_fs_hostile.py)
    proc = start_cli("get", origin.url_for("fill.bin"), "-o", str(out), "-q", "--sha256", sha, "--connections", "1",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                     env={**os.environ, "PREFETCH_PREALLOCATE": "0"})
    from prefetch.engine.resume_state import load_state

    def saved() -> int:
        state = load_state(Path(f"{out}.part.json"))
        return sum(b - a for a, b in state.done) if state else 0

    deadline = time.monotonic() + 30
    while saved() < 300_000 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the download ended before the disk could be filled"
    # Another program fills the disk while we download.
    filler = fs.path / "filler"
    with open(filler, "wb", buffering=0) as fh:  # (unbuffered: nothing left to flush at close)
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError:
            pass
    stdout, stderr = proc.communicate(timeout=60)
    proc_result = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    line = one_error_line(proc_result, ExitCode.FILESYSTEM)
    assert "no space left" in line and "free" in line
    assert not out.exists()
    kept = recorded_bytes(out, [data])  # the .part is kept and its recorded bytes are right
    assert kept >= 100_000
    assert not list(fs.path.glob("*.tmp"))

    filler.unlink()
    origin.rate = None
    proc = get(cli, origin.url_for("fill.bin"), out, "--json", sha256=sha)
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(proc.stdout)
    assert result["reused"] == kept  # resumed, not started over
    assert out.read_bytes() == data
    assert strays(fs.path, {"fill.bin"}) == []


def test_no_room_to_extract_is_exit_5_and_the_verified_archive_is_kept(cli, origin, tmpfs, home):
    rng = random.Random(3)
    words = [bytes(rng.choice(b"abcdefghij") for _ in range(8)) for _ in range(300)]
    members = {f"big/f{i}.txt": b" ".join(rng.choice(words) for _ in range(60_000)) for i in range(5)}
    archive = tar_gz(members)
    assert len(archive) < MiB and sum(map(len, members.values())) > 2 * MiB
    sha = hashlib.sha256(archive).hexdigest()
    origin.put("big.tar.gz", archive)
    registry = write_registry(home / "reg.toml", "bigset", origin.url_for("big.tar.gz"), sha256=sha, extract=["big"])
    fs = tmpfs("2m")
    line = one_error_line(cli("get", "bigset", "--registry", str(registry), "--cache-dir", str(fs.path), "-q"),
                          ExitCode.FILESYSTEM)
    assert "space" in line
    datasets = fs.path / "datasets"
    assert not (datasets / "big.tar.gz").exists() and not (datasets / "big").exists()
    sent = origin.bytes_sent

    fs.remount("size=16m")
    proc = cli("get", "bigset", "--registry", str(registry), "--cache-dir", str(fs.path), "-q")
    assert proc.returncode == 0, proc.stderr
    assert origin.bytes_sent == sent  # the verified archive was kept, not downloaded again
    assert hashlib.sha256((datasets / "big.tar.gz").read_bytes()).hexdigest() == sha
    assert (datasets / "big" / "big" / "f2.txt").read_bytes() == members["big/f2.txt"]
    assert strays(datasets, {"big.tar.gz", "big"}) == []


# --------------------------------------------------------------------------- unwritable places


def test_cache_dir_under_a_regular_file(cli, home, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    line = one_error_line(cli("get", "mnist", "--cache-dir", str(blocker / "keras")), ExitCode.FILESYSTEM)
    assert str(blocker) in line and "Not a directory" in line


def test_output_under_a_regular_file(cli, origin, tmp_path):
    origin.put("d.bin", b"x" * 1000)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    line = one_error_line(get(cli, origin.url_for("d.bin"), blocker / "sub" / "d.bin"), ExitCode.FILESYSTEM)
    assert str(blocker) in line
    assert origin.requests == []


def test_read_only_target_dir(cli, origin, tmpfs):
    origin.put("d.bin", b"y" * 5000)
    fs = tmpfs("1m", read_only=True)
    line = one_error_line(get(cli, origin.url_for("d.bin"), fs.path / "d.bin"), ExitCode.FILESYSTEM)
    assert "Read-only file system" in line and str(fs.path / "d.bin") in line
    assert "writable" in line
    assert os.listdir(fs.path) == []


def test_read_only_cache_dir(cli, home, tmpfs):
    fs = tmpfs("1m", read_only=True)
    line = one_error_line(cli("get", "mnist", "--cache-dir", str(fs.path)), ExitCode.FILESYSTEM)
    assert "Read-only file system" in line and "--cache-dir" in line


def test_read_only_cache_dir_with_a_partial_download_in_it(cli, origin, tmpfs):
    """A .part left on a disk that became read-only: a clear error, and the .part untouched."""
    data = random.Random(4).randbytes(300_000)
    origin.put("p.bin", data)
    fs = tmpfs("2m")
    out = fs.path / "p.bin"
    from tests.origin import CloseAfter

    origin.add_fault(CloseAfter(100_000, path="p.bin"))
    env = dict(os.environ, PREFETCH_RETRIES="0")
    first = cli("get", origin.url_for("p.bin"), "-o", str(out), "-q", "--connections", "1", env=env)
    assert first.returncode == ExitCode.NETWORK, first.stderr
    kept = recorded_bytes(out, [data])
    assert kept == 100_000
    fs.remount("ro")
    line = one_error_line(get(cli, origin.url_for("p.bin"), out), ExitCode.FILESYSTEM)
    assert "Read-only file system" in line
    assert recorded_bytes(out, [data]) == kept
    fs.remount("rw")
    proc = get(cli, origin.url_for("p.bin"), out, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["reused"] == kept
    assert out.read_bytes() == data


@pytest.mark.parametrize("how", ["regular file", "read-only mount"])
def test_unusable_prefetch_home(cli, origin, tmp_path, tmpfs, how):
    """prefetch's own state dir (locks) unusable: exit 5 and a pointer to PREFETCH_HOME, no traceback."""
    origin.put("d.bin", b"z" * 1000)
    if how == "regular file":
        blocker = tmp_path / "blocker"
        blocker.write_text("x")
        state_home = blocker / "ph"
    else:
        fs = tmpfs("1m")
        (fs.path / "ph" / "state" / "locks").mkdir(parents=True)
        fs.remount("ro")
        state_home = fs.path / "ph"
    env = dict(os.environ, PREFETCH_HOME=str(state_home))
    out = tmp_path / "d.bin"
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(out), "-q", env=env), ExitCode.FILESYSTEM)
    assert "PREFETCH_HOME" in line
    assert not out.exists()


# --------------------------------------------------------------------------- names


ODD_NAME = "data ü 数据 #1%.bin"


def test_spaces_and_non_ascii_in_urls_dirs_and_names(cli, origin, tmp_path):
    data = random.Random(5).randbytes(200_000)
    sha = hashlib.sha256(data).hexdigest()
    origin.put(ODD_NAME, data)
    out = tmp_path / "dir with spaces" / "ünïcødé 目录" / "file ü.bin"
    proc = cli("get", origin.url_for(ODD_NAME), "-o", str(out), "--sha256", sha)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    assert str(out) in proc.stdout
    assert strays(out.parent, {out.name}) == []


def test_non_ascii_paths_in_a_c_locale(cli, origin, tmp_path):
    data = random.Random(6).randbytes(50_000)
    origin.put(ODD_NAME, data)
    out = tmp_path / "ç dir" / "naïve.bin"
    env = dict(os.environ, LC_ALL="C", LANG="C")
    env.pop("PYTHONIOENCODING", None)
    proc = cli("get", origin.url_for(ODD_NAME), "-o", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert out.read_bytes() == data
    # An error naming a non-ASCII path is still one clean line.
    bad = cli("get", origin.url_for("nope ü.bin"), "-o", str(out.with_name("x ü.bin")), "-q", env=env)
    one_error_line(bad, ExitCode.NETWORK)


def test_registry_dataset_into_a_cache_dir_with_spaces_and_non_ascii(cli, origin, tmp_path):
    rng = random.Random(7)
    payload = rng.randbytes(20_000)
    archive = tar_gz({"inner ü/file 数据.bin": payload})
    sha = hashlib.sha256(archive).hexdigest()
    origin.put("arch ü.tar.gz", archive)
    registry = write_registry(tmp_path / "régistry ü.toml", "odd-set", origin.url_for("arch ü.tar.gz"), sha256=sha,
                              target="sub dir/arch ü.tar.gz", extract=["unpacked ü"])
    cache = tmp_path / "my cache ü" / "ker as"
    proc = cli("get", "odd-set", "--registry", str(registry), "--cache-dir", str(cache))
    assert proc.returncode == 0, proc.stderr
    datasets = cache / "datasets"
    assert hashlib.sha256((datasets / "sub dir" / "arch ü.tar.gz").read_bytes()).hexdigest() == sha
    assert (datasets / "unpacked ü" / "inner ü" / "file 数据.bin").read_bytes() == payload
