"""Shared cache directories and non-regular files (issue 11, classes 1 and 4).

Keras falls back to ``/tmp/.keras`` and teams share group-writable caches: another local
user can plant symlinks, FIFOs and files at any name prefetch uses. These tests plant them
as a real second user (uid 65534, from a forked child that drops root: the suite runs as
root in CI) in a sticky, world-writable directory like /tmp, and check that prefetch never
writes, truncates, renames or deletes through them, never blocks on a FIFO, and never calls
a file "cached" without proof.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import stat
import tempfile
import traceback
from pathlib import Path

import pytest

from prefetch.errors import ExitCode
from tests.helpers import write_registry
from tests.test_bad_input import one_error_line
from tests.archives import tar_gz

OTHER = 65534  # nobody
DATA = random.Random(11).randbytes(120_000)
SHA = hashlib.sha256(DATA).hexdigest()
VICTIM_BYTES = b"the victim's own file\n"


def as_other_user(action) -> None:
    """Run ``action()`` in a forked child as uid/gid 65534 (a real second user)."""
    if os.geteuid() != 0:
        pytest.skip("planting files as another user needs root (CI runs the suite as root)")
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.setgroups([])
            os.setgid(OTHER)
            os.setuid(OTHER)
            action()
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "planting as the other user failed"


@pytest.fixture
def shared():
    """A sticky world-writable directory like /tmp (under /tmp: the second user can reach it)."""
    path = Path(tempfile.mkdtemp(prefix="prefetch-shared-", dir="/tmp"))
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def victim(tmp_path):
    """A file of ours that a planted link points at: it must never change."""
    path = tmp_path / "victim.txt"
    path.write_bytes(VICTIM_BYTES)
    return path


def _home_with_a_planted_link(shared: Path, state_dir: Path, name: Path, victim: Path) -> dict:
    """PREFETCH_HOME=shared/ph whose ``state_dir`` the other user made, with their link to
    ``victim`` at ``name``; the environment that uses it."""
    plant_dirs(shared / "ph", shared / "ph" / "state", state_dir)
    as_other_user(lambda: os.symlink(victim, name))
    return dict(os.environ, PREFETCH_HOME=str(shared / "ph"))


def plant_dirs(*dirs: Path) -> None:
    """The other user creates these directories first (world-writable, as they would)."""
    def make():
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o777)
    as_other_user(make)


def get_url(cli, origin, out: Path, *extra: str, name: str = "d.bin"):
    return cli("get", origin.url_for(name), "-o", str(out), "-q", *extra, timeout=60)


# --------------------------------------------------------------------------- class 1: planted links


@pytest.mark.parametrize("suffix", [".part", ".part.json"])
def test_symlink_planted_at_the_partial_or_its_state_is_refused(cli, origin, shared, victim, suffix):
    origin.put("d.bin", DATA)
    out = shared / "d.bin"
    as_other_user(lambda: os.symlink(victim, f"{out}{suffix}"))
    line = one_error_line(get_url(cli, origin, out), ExitCode.FILESYSTEM)
    assert f"{out}{suffix}" in line and "symbolic link" in line
    assert victim.read_bytes() == VICTIM_BYTES  # never truncated or overwritten through the link
    assert os.path.islink(f"{out}{suffix}")  # and the link itself is left for its owner
    assert not out.exists()


def test_symlink_at_the_partial_is_refused_even_when_the_download_fails(cli, origin, shared, victim):
    out = shared / "missing.bin"  # the origin answers 404
    as_other_user(lambda: os.symlink(victim, f"{out}.part"))
    proc = cli("get", origin.url_for("missing.bin"), "-o", str(out), "-q", timeout=60)
    assert proc.returncode != 0
    assert victim.read_bytes() == VICTIM_BYTES


def test_file_planted_by_another_user_at_the_partial_is_not_used(cli, origin, shared):
    origin.put("d.bin", DATA)
    out = shared / "d.bin"
    state = {"version": 1, "urls": [origin.url_for("d.bin")], "size": len(DATA), "ranges": True,
             "validators": {}, "done": [[0, 60_000]], "algorithm": "sha256"}

    def plant():
        Path(f"{out}.part").write_bytes(b"X" * 60_000)
        Path(f"{out}.part.json").write_text(json.dumps(state))
    as_other_user(plant)
    line = one_error_line(get_url(cli, origin, out, "--sha256", SHA), ExitCode.FILESYSTEM)
    assert "another user" in line and str(out) in line
    assert not out.exists()


def test_file_planted_by_another_user_at_the_final_name_is_not_cached(cli, origin, shared):
    """Without a hash, another user's file is no proof of anything: refused, not reported cached."""
    origin.put("d.bin", DATA)
    out = shared / "d.bin"
    as_other_user(lambda: out.write_bytes(b"planted"))
    proc = cli("get", origin.url_for("d.bin"), "-o", str(out), timeout=60)
    line = one_error_line(proc, ExitCode.FILESYSTEM)
    assert "another user" in line and str(out) in line
    assert "cached" not in proc.stdout
    assert out.read_bytes() == b"planted"


def test_file_planted_by_another_user_is_cached_only_when_it_verifies(cli, origin, shared):
    origin.put("d.bin", DATA)
    good, bad = shared / "good.bin", shared / "bad.bin"

    def plant():
        good.write_bytes(DATA)
        bad.write_bytes(DATA[:-1] + b"!")
    as_other_user(plant)
    proc = get_url(cli, origin, good, "--sha256", SHA, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["status"] == "cached"  # verified: it is the right file
    line = one_error_line(get_url(cli, origin, bad, "--sha256", SHA), ExitCode.FILESYSTEM)
    assert str(bad) in line and "another user" in line


def test_symlink_planted_at_an_extraction_target_is_refused(cli, home, origin, shared, victim, tmp_path):
    """The link must not make prefetch extract into, rename away or delete the victim's directory."""
    victim_dir = tmp_path / "precious"
    victim_dir.mkdir()
    (victim_dir / "pkg").mkdir()
    (victim_dir / "pkg" / "mine.txt").write_text("mine")
    archive = tar_gz({"pkg/a.txt": b"A" * 100})
    origin.put("pkg.tar.gz", archive)
    root = shared / ".keras"
    datasets = root / "datasets"
    plant_dirs(root, datasets)
    as_other_user(lambda: os.symlink(victim_dir, datasets / "pkg-target"))
    reg = write_registry(tmp_path / "r.toml", "pkg", origin.url_for("pkg.tar.gz"),
                         sha256=hashlib.sha256(archive).hexdigest(), target="pkg.tar.gz", extract=["pkg-target"])
    line = one_error_line(cli("get", "pkg", "--registry", str(reg), "--cache-dir", str(root), "-q", timeout=60),
                          ExitCode.FILESYSTEM)
    assert str(datasets / "pkg-target") in line and "symbolic link" in line
    assert sorted(p.name for p in victim_dir.rglob("*")) == ["mine.txt", "pkg"]
    assert not (datasets / "pkg.tar.gz").exists()


def test_directory_of_another_user_at_an_extracted_name_is_not_replaced(cli, home, origin, shared, tmp_path):
    archive = tar_gz({"pkg/a.txt": b"A" * 100})
    origin.put("pkg.tar.gz", archive)
    root = shared / ".keras"
    datasets = root / "datasets"
    plant_dirs(root, datasets)

    def plant():
        (datasets / "pkg").mkdir()
        (datasets / "pkg" / "theirs.txt").write_text("theirs")
    as_other_user(plant)
    reg = write_registry(tmp_path / "r.toml", "pkg", origin.url_for("pkg.tar.gz"),
                         sha256=hashlib.sha256(archive).hexdigest(), target="pkg.tar.gz", extract=["."])
    line = one_error_line(cli("get", "pkg", "--registry", str(reg), "--cache-dir", str(root), "-q", timeout=60),
                          ExitCode.FILESYSTEM)
    assert str(datasets / "pkg") in line and "another user" in line
    assert (datasets / "pkg" / "theirs.txt").read_text() == "theirs"
    assert [p.name for p in datasets.iterdir() if p.name.startswith(".pkg.old")] == []


def test_hard_link_alias_planted_as_a_symlink_is_refused(cli, home, origin, shared, victim, tmp_path):
    origin.put("a.bin", DATA)
    root = shared / ".keras"
    datasets = root / "datasets"
    plant_dirs(root, datasets)
    as_other_user(lambda: os.symlink(victim, datasets / "alias.bin"))
    reg = tmp_path / "r.toml"
    reg.write_text(f'[a]\n[[a.files]]\nurl = "{origin.url_for("a.bin")}"\nsha256 = "{SHA}"\n'
                   f'target = "a.bin"\nalso = ["alias.bin"]\n')
    line = one_error_line(cli("get", "a", "--registry", str(reg), "--cache-dir", str(root), "-q", timeout=60),
                          ExitCode.FILESYSTEM)
    assert str(datasets / "alias.bin") in line
    assert victim.read_bytes() == VICTIM_BYTES


def test_directory_link_planted_for_the_cache_is_not_followed(cli, home, origin, shared, tmp_path):
    """/tmp/.keras/datasets planted as a link to a directory of ours: never written through."""
    origin.put("d.bin", DATA)
    mine = tmp_path / "mine"
    mine.mkdir()
    root = shared / ".keras"
    plant_dirs(root)
    as_other_user(lambda: os.symlink(mine, root / "datasets"))
    reg = write_registry(tmp_path / "r.toml", "d", origin.url_for("d.bin"), sha256=SHA, target="d.bin")
    line = one_error_line(cli("get", "d", "--registry", str(reg), "--cache-dir", str(root), "-q", timeout=60),
                          ExitCode.FILESYSTEM)
    assert str(root / "datasets") in line
    assert list(mine.iterdir()) == []


def test_state_dir_falls_back_to_a_private_temp_dir_when_home_is_unwritable(cli, origin, tmp_path, shared,
                                                                               monkeypatch):
    """HOME unwritable (where Keras uses /tmp/.keras): prefetch still works, state in $TMPDIR/prefetch-<uid>."""
    home = Path("/proc/prefetch-no-home")  # cannot be created by anyone, root included
    env = dict(os.environ, HOME=str(home), TMPDIR=str(shared))
    for var in ("PREFETCH_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "KERAS_HOME"):
        env.pop(var, None)
    origin.put("d.bin", DATA)
    out = tmp_path / "d.bin"
    proc = cli("get", origin.url_for("d.bin"), "-o", str(out), "--sha256", SHA, "-q", env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == DATA
    state = shared / f"prefetch-{os.geteuid()}"
    assert state.is_dir() and stat.S_IMODE(state.stat().st_mode) == 0o700
    assert (state / "locks").is_dir()
    status = cli("status", env=env)
    assert status.returncode == 0, status.stderr


def test_state_dir_fallback_planted_by_another_user_is_refused(cli, origin, tmp_path, shared, victim):
    env = dict(os.environ, HOME="/proc/prefetch-no-home", TMPDIR=str(shared))
    for var in ("PREFETCH_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "KERAS_HOME"):
        env.pop(var, None)
    planted = shared / f"prefetch-{os.geteuid()}"
    as_other_user(lambda: os.symlink(victim.parent, planted))
    origin.put("d.bin", DATA)
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), "-q", env=env,
                              timeout=60), ExitCode.FILESYSTEM)
    assert str(planted) in line
    assert not (victim.parent / "locks").exists()


# --------------------------------------------------------------------------- class 4: non-regular files


def test_fifo_at_the_state_file_does_not_block(cli, origin, tmp_path):
    origin.put("d.bin", DATA)
    out = tmp_path / "d.bin"
    os.mkfifo(f"{out}.part.json")
    line = one_error_line(get_url(cli, origin, out), ExitCode.FILESYSTEM)
    assert f"{out}.part.json" in line and "FIFO" in line


def test_fifo_at_the_final_path_does_not_block_get_list_or_verify(cli, home, origin, tmp_path):
    origin.put("d.bin", DATA)
    reg = write_registry(tmp_path / "r.toml", "d", origin.url_for("d.bin"), target="d.bin")
    datasets = home / ".keras" / "datasets"
    datasets.mkdir(parents=True)
    os.mkfifo(datasets / "d.bin")
    for args in (("get", "d"), ("list",), ("verify", "d")):
        line = one_error_line(cli(*args, "--registry", str(reg), timeout=60), ExitCode.FILESYSTEM)
        assert str(datasets / "d.bin") in line and "FIFO" in line, args
    line = one_error_line(cli("verify", str(datasets / "d.bin"), timeout=60), ExitCode.FILESYSTEM)
    assert "FIFO" in line
    assert stat.S_ISFIFO(os.lstat(datasets / "d.bin").st_mode)


def test_output_to_dev_null_is_refused_not_cached(cli, origin):
    origin.put("d.bin", DATA)
    proc = cli("get", origin.url_for("d.bin"), "-o", "/dev/null", timeout=60)
    line = one_error_line(proc, ExitCode.FILESYSTEM)
    assert "/dev/null" in line and "character device" in line
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_output_to_a_proc_file_is_not_reported_cached(cli, origin):
    origin.put("version", DATA)
    proc = cli("get", origin.url_for("version"), "-o", "/proc/version", "-q", timeout=60)
    line = one_error_line(proc, ExitCode.FILESYSTEM)
    assert "/proc/version" in line
    assert "cached" not in proc.stdout


def test_truncated_leftover_without_hash_is_downloaded_again(cli, origin, tmp_path):
    """A 1000-byte leftover of an earlier wget at the final name: no proof of completeness."""
    origin.put("d.bin", DATA)
    out = tmp_path / "d.bin"
    out.write_bytes(DATA[:1000])
    proc = get_url(cli, origin, out, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["status"] == "downloaded"
    assert out.read_bytes() == DATA
    # Now prefetch placed it and recorded so: the same command is "cached", with no request.
    before = len(origin.data_requests("d.bin"))
    proc = get_url(cli, origin, out, "--json")
    assert json.loads(proc.stdout)[0]["status"] == "cached"
    assert len(origin.data_requests("d.bin")) == before
    # A file changed since it was placed is not the one prefetch completed.
    out.write_bytes(DATA[:500])
    proc = get_url(cli, origin, out, "--json")
    assert json.loads(proc.stdout)[0]["status"] == "downloaded"
    assert out.read_bytes() == DATA
    # ...and its record (there was one: it is replaced, not kept) names the new file.
    proc = get_url(cli, origin, out, "--json")
    assert json.loads(proc.stdout)[0]["status"] == "cached"


def test_completion_record_planted_as_a_link_in_a_shared_state_dir_is_not_written_through(
        cli, origin, shared, victim, tmp_path):
    """A file's first record is created in place (no temp file): a link another user planted at
    its name is never followed; the file is placed all the same, only unrecorded."""
    from prefetch.cache.placement import completion_path

    origin.put("d.bin", DATA)
    out = tmp_path / "d.bin"
    placed = shared / "ph" / "state" / "placed"
    env = _home_with_a_planted_link(shared, placed, completion_path(placed, out), victim)
    proc = cli("get", origin.url_for("d.bin"), "-o", str(out), "-q", env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == DATA
    assert victim.read_bytes() == VICTIM_BYTES
    assert os.path.islink(completion_path(placed, out))


def test_lock_file_planted_as_a_link_in_a_shared_state_dir_is_refused(cli, origin, shared, victim, tmp_path):
    """PREFETCH_HOME on a disk shared with others: a link at a lock's name is never truncated through."""
    from prefetch.fs import rangelocks
    from prefetch.fs.locks import lock_path, shared_lock_path

    origin.put("d.bin", DATA)
    out = tmp_path / "d.bin"
    locks = shared / "ph" / "state" / "locks"
    name = shared_lock_path(locks) if rangelocks.AVAILABLE else lock_path(locks, out)
    env = _home_with_a_planted_link(shared, locks, name, victim)
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(out), "-q", env=env, timeout=60),
                          ExitCode.FILESYSTEM)
    assert str(name) in line and "symbolic link" in line
    assert victim.read_bytes() == VICTIM_BYTES


def test_another_users_shared_lock_file_is_never_written_and_still_excludes(shared, tmp_path):
    """The other user's locks file (``rangelocks``) is only read here: a read lock on the target's
    byte keeps this process and the other user's apart, the per-target file keeps apart the
    processes that, like this one, cannot write it."""
    from prefetch.errors import LockTimeoutError
    from prefetch.fs import rangelocks
    from prefetch.fs.locks import hold_lock, lock_path, read_owner, shared_lock_path

    if not rangelocks.AVAILABLE:
        pytest.skip("no OFD locks here: a lock file per target")
    locks, target = shared / "ph" / "state" / "locks", shared / "data.bin"
    plant_dirs(shared / "ph", shared / "ph" / "state", locks)
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the other user holds the target's lock
        code = 0
        try:
            os.setgroups([])
            os.setgid(OTHER)
            os.setuid(OTHER)
            with hold_lock(locks, target, timeout=1, job="theirs"):
                os.write(ready_w, b"x")
                os.read(done_r, 1)
            os.read(done_r, 1)
            with hold_lock(locks, target, timeout=0):  # once we hold it (below), they wait
                code = 3
        except LockTimeoutError:
            pass
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            code = 1
        os._exit(code)
    try:
        assert os.read(ready_r, 1) == b"x"
        assert os.stat(shared_lock_path(locks)).st_uid == OTHER
        seen = []
        with pytest.raises(LockTimeoutError):
            with hold_lock(locks, target, timeout=0.2, on_wait=seen.append):
                pass
        assert seen and seen[0] is not None and seen[0].job == "theirs", "their record is read"
        os.write(done_w, b"x")
        with hold_lock(locks, target, timeout=5):
            holder = os.fork()
            if holder == 0:  # pragma: no cover - another process of ours, as read-only as we are
                code = 0
                try:
                    with hold_lock(locks, target, timeout=0):
                        code = 1
                except LockTimeoutError:
                    pass
                os._exit(code)
            _, status = os.waitpid(holder, 0)
            assert os.waitstatus_to_exitcode(status) == 0, "two read-only processes exclude each other"
            assert read_owner(lock_path(locks, target)).pid == os.getpid()  # (in our .owner file)
            assert f'"pid": {os.getpid()}'.encode() not in shared_lock_path(locks).read_bytes(), \
                "their file is never written here"
            os.write(done_w, b"x")  # the other user tries while we hold it
            _, status = os.waitpid(pid, 0)
            pid = 0
    finally:
        if pid:
            os.write(done_w, b"xx")
            _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the other user waits while we hold it"


def test_rm_and_clean_leave_another_users_entries_in_a_shared_cache(cli, home, shared):
    """`prefetch rm` / `clean` in /tmp/.keras remove only what is ours (even when run as root)."""
    root = shared / ".keras"
    datasets = root / "datasets"
    plant_dirs(root, datasets)

    def plant():
        (datasets / "mnist.npz").write_bytes(b"their mnist")
        (datasets / "theirs.bin.part").write_bytes(b"their partial")
        os.utime(datasets / "theirs.bin.part", (1, 1))
        (datasets / ".theirs.bin.extract-0badf00d").mkdir()
    as_other_user(plant)
    (datasets / "mine.bin.part").write_bytes(b"my partial")
    os.utime(datasets / "mine.bin.part", (1, 1))
    removed = cli("rm", "mnist", "--cache-dir", str(root))
    assert removed.returncode == ExitCode.FILESYSTEM, removed.stderr
    (line,) = removed.stderr.splitlines()
    assert line.startswith("prefetch: error: ") and str(datasets / "mnist.npz") in line and "another user" in line
    assert (datasets / "mnist.npz").read_bytes() == b"their mnist"
    cleaned = cli("clean", "--cache-dir", str(root), "--json")
    assert cleaned.returncode == 0, cleaned.stderr
    result = json.loads(cleaned.stdout)
    assert [Path(r["path"]).name for r in result["removed"]] == ["mine.bin.part"]
    assert any("another user" in line for line in result["not_ours"])
    assert (datasets / "theirs.bin.part").exists() and (datasets / ".theirs.bin.extract-0badf00d").exists()


def test_safe_open_keeps_append_and_blocks(tmp_path):
    """safefs opens with O_NONBLOCK (a planted FIFO never hangs it), then clears only that flag:
    a log opened for appending still appends (a job's log across runs), and reads block."""
    import fcntl

    from prefetch.fs.safefs import open_file

    log = tmp_path / "job.log"
    for line in (b"first\n", b"second\n"):
        fd = open_file(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            assert flags & os.O_APPEND and not flags & os.O_NONBLOCK
            os.write(fd, line)
        finally:
            os.close(fd)
    assert log.read_bytes() == b"first\nsecond\n"
