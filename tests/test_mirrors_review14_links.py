"""prefetch's own mirror state (a backup's meta.json, mirror-marks.json) replaced by a link
prefetch did not make, or by another account's file: never written through, never trusted.
Real CLI processes; the other account is a real uid 65534 (root needed to chown)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import run_cli
from mirror_helpers import isolate_tool_env, pip_user_conf

NOBODY = 65534
needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")


@pytest.fixture
def env(home, monkeypatch):
    return isolate_tool_env(monkeypatch, home)


def _state() -> Path:
    return Path(os.environ["PREFETCH_HOME"]) / "state"


def _only_backup() -> Path:
    (backup,) = (_state() / "backups").iterdir()
    return backup


def test_a_backup_meta_replaced_by_a_link_is_never_written_through(home, env, tmp_path):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_text("[global]\ntimeout = 60\n")
    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    meta = _only_backup() / "meta.json"
    elsewhere = tmp_path / "notes.json"  # the user's own file, which happens to hold the same JSON
    elsewhere.write_bytes(meta.read_bytes())
    before = elsewhere.read_bytes()
    meta.unlink()
    meta.symlink_to(elsewhere)

    done = run_cli("mirror", "restore", env=env)
    assert "Traceback" not in done.stderr
    assert elsewhere.read_bytes() == before  # not written through (it was: "restored": ... added)
    assert meta.is_symlink()
    assert "tuna" in conf.read_text()  # a backup prefetch cannot trust restores nothing
    assert str(_only_backup()) in done.stdout + done.stderr and "cannot be read" in done.stdout + done.stderr


def test_the_marks_file_replaced_by_a_link_is_never_written_through(home, env, tmp_path):
    marks = _state() / "mirror-marks.json"
    marks.parent.mkdir(parents=True)
    elsewhere = tmp_path / "victim.json"
    elsewhere.write_text("{}\n")
    marks.symlink_to(elsewhere)
    done = run_cli("mirror", "use", "aliyun-internal", env=env)  # an http mirror: a trusted host to record
    assert elsewhere.read_text() == "{}\n", elsewhere.read_text()
    assert done.returncode == 5 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and str(marks) in done.stderr
    assert not pip_user_conf(home).exists()  # refused before the config was written


@needs_root
def test_a_backup_meta_another_account_planted_is_not_trusted(home, env, tmp_path):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_text("[global]\ntimeout = 60\n")
    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    meta = _only_backup() / "meta.json"
    os.chown(meta, NOBODY, -1)
    done = run_cli("mirror", "restore", env=env)
    assert "Traceback" not in done.stderr
    assert "tuna" in conf.read_text() and meta.stat().st_uid == NOBODY
    assert "cannot be read" in done.stdout + done.stderr


def test_a_backup_copy_replaced_by_a_link_is_not_followed(home, env, tmp_path):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_text("[global]\ntimeout = 60\n")
    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    (blob,) = [p for p in _only_backup().iterdir() if p.name == "0-pip.conf"]
    elsewhere = tmp_path / "same-bytes.conf"
    elsewhere.write_bytes(blob.read_bytes())  # even the same bytes: the link is not prefetch's
    blob.unlink()
    blob.symlink_to(elsewhere)
    done = run_cli("mirror", "restore", env=env)
    assert done.returncode == 5 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "symbolic link" in done.stderr and "nothing was restored" in done.stderr
    assert "tuna" in conf.read_text()


def test_use_and_restore_wait_for_the_mirror_settings_lock(home, env):
    """Two runs at once each read a config and the marks, then write both: one at a time.

    The test holds the lock a `use` takes; the `use` writes nothing until it is released."""
    import fcntl
    import subprocess
    import sys
    import time

    lock = _state() / "mirror.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        run = subprocess.Popen([sys.executable, "-m", "prefetch", "mirror", "use", "aliyun-internal"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        try:
            time.sleep(3)  # (an ordering check, not a speed one: without the lock it has written by now)
            assert run.poll() is None and not pip_user_conf(home).exists()
            assert not (_state() / "backups").exists()
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
        out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert "mirrors.cloud.aliyuncs.com" in pip_user_conf(home).read_text()


def test_restore_with_no_backup_ever_creates_nothing(home, env):
    done = run_cli("mirror", "restore", env=env)
    assert done.returncode == 0 and "nothing to restore" in done.stdout, done.stderr
    assert not Path(os.environ["PREFETCH_HOME"]).exists()  # no state dir, no lock file made for nothing


@needs_root
def test_a_state_dir_that_cannot_be_written_is_one_line_and_no_config_changes(home, env):
    import shutil
    import subprocess

    state = _state()
    state.mkdir(parents=True)
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(state)]).returncode != 0:
        pytest.skip("no chattr +i here (root ignores mode bits)")
    try:
        done = run_cli("mirror", "use", "tuna", env=env)
    finally:
        subprocess.run(["chattr", "-i", str(state)])
    assert done.returncode == 5 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and str(state) in done.stderr
    assert not pip_user_conf(home).exists()
