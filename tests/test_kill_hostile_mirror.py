"""SIGKILL `prefetch mirror use` at every flush it makes, then switch and restore.

Each run is killed by strace at its Nth ``fsync``/``fdatasync`` (N = 1, 2, ... until a run
completes): before, between and after the backup, the config and the record of the hosts
prefetch added (``mirror-marks.json``). Whatever the moment:

* switching to an https mirror afterwards leaves no ``trusted-host`` of the killed run's
  http mirror behind (a TLS exemption nobody asked to keep);
* repeated ``mirror restore`` walks back to the user's original bytes.

And the backup's copy of the config is on disk (fsynced) before the new config is renamed
into place: a machine that dies right after `use` (a VM preempted) keeps a copy restore can
use, not an empty file it must refuse.

Real CLI processes and real signals; skipped where strace (or ptrace) is unavailable.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.mirror_helpers import isolate_tool_env, pip_user_conf, write_user_mirrors

ORIGINAL = b"[global]\ntimeout = 60\n"
MIRRORS = """\
[mirrors.corp]
pypi = "http://10.0.0.1/simple"
trusted_host = "10.0.0.1"

[mirrors.safe]
pypi = "https://safe.example/simple"
"""


def _strace_works() -> bool:
    if shutil.which("strace") is None:
        return False
    probe = subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "true"], capture_output=True)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _strace_works(), reason="needs strace (and ptrace) to kill at a flush")


@pytest.fixture
def env(home, monkeypatch):
    env = isolate_tool_env(monkeypatch, home)
    write_user_mirrors(home, MIRRORS)
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_bytes(ORIGINAL)
    return dict(os.environ)


def _use_under_strace(env: dict, trace: Path, *, kill_at: int | None) -> subprocess.CompletedProcess:
    """``prefetch mirror use corp`` traced (flushes, renames, with paths); SIGKILLed at flush ``kill_at``."""
    cmd = ["strace", "-f", "-qq", "-y", "-o", str(trace), "-e", "trace=fsync,fdatasync,rename,renameat,renameat2"]
    if kill_at is not None:
        cmd += ["-e", f"inject=fsync,fdatasync:signal=SIGKILL:when={kill_at}"]
    cmd += [sys.executable, "-m", "prefetch", "mirror", "use", "corp"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def _reset(home: Path) -> None:
    shutil.rmtree(Path(os.environ["PREFETCH_HOME"]) / "state", ignore_errors=True)
    pip_user_conf(home).write_bytes(ORIGINAL)


def test_use_killed_at_every_flush_leaves_no_trusted_host_and_restores(home, env, tmp_path):
    conf = pip_user_conf(home)
    completed = False
    for kill_at in range(1, 12):
        _reset(home)
        killed = _use_under_strace(env, tmp_path / f"trace{kill_at}", kill_at=kill_at)
        if killed.returncode == 0:
            completed = True
            break
        assert killed.returncode in (-9, 137), (kill_at, killed.returncode, killed.stderr[-500:])
        after_kill = conf.read_bytes()

        switched = run_cli("mirror", "use", "safe", env=env)
        assert switched.returncode == 0, (kill_at, switched.stderr)
        text = conf.read_text()
        assert "index-url = https://safe.example/simple" in text, (kill_at, text)
        assert "10.0.0.1" not in text, f"killed at flush {kill_at}: the http mirror's trusted host stayed:\n{text}"

        # Restore walks back: `use safe`, then the killed run (if it got as far as a backup).
        seen = [conf.read_bytes()]
        for _ in range(4):
            back = run_cli("mirror", "restore", env=env)
            assert back.returncode == 0, (kill_at, back.stderr)
            if "nothing to restore" in back.stdout:
                break
            seen.append(conf.read_bytes())
        assert conf.read_bytes() == ORIGINAL, (kill_at, seen)
        assert after_kill in seen, (kill_at, after_kill, seen)
    assert completed, "mirror use never got past its flushes"


def test_backup_copy_is_flushed_before_the_new_config_is_in_place(home, env, tmp_path):
    trace = tmp_path / "trace"
    done = _use_under_strace(env, trace, kill_at=None)
    assert done.returncode == 0, done.stderr
    lines = trace.read_text().splitlines()
    flushed_copy = [i for i, line in enumerate(lines)
                    if re.search(r"f(data)?sync\(\d+</[^>]*/backups/pip-[^/>]*/0-pip\.conf>\)\s+= 0", line)]
    config_in_place = [i for i, line in enumerate(lines)
                       if re.search(r"rename[a-z0-9]*\(.*\.pip\.conf\.[^\"]*\.tmp\", .*/pip/pip\.conf\"", line)]
    assert config_in_place, "\n".join(lines)
    assert flushed_copy and flushed_copy[0] < config_in_place[0], "\n".join(lines)
