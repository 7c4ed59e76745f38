"""SIGKILL `prefetch export DIR` at each of its renames, then export again.

DIR is a team's static mirror, served as it is: a temp copy (or link) that a killed export
left beside a file's name must not stay there for ever (a partial copy can be as big as the
dataset). The next export removes what a dead export left, and the directory ends with the
files, SHA256SUMS and nothing else. Real CLI processes; strace kills at the Nth rename.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.test_store import MIB, cached_toy


def _strace_works() -> bool:
    if shutil.which("strace") is None:
        return False
    return subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "true"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _strace_works(), reason="needs strace (and ptrace) to kill at a rename")


def test_export_killed_at_each_rename_leaves_nothing_after_the_next_export(home, tmp_path, cli, origin):
    reg, files = cached_toy(tmp_path, origin, cli, sizes=(MIB, 1000))
    completed = False
    for kill_at in range(1, 10):
        out = tmp_path / f"www{kill_at}"
        killed = subprocess.run(
            ["strace", "-f", "-qq", "-o", os.devnull, "-e", "trace=rename,renameat,renameat2",
             "-e", f"inject=rename,renameat,renameat2:signal=SIGKILL:when={kill_at}",
             sys.executable, "-m", "prefetch", "export", str(out), "toy", "--registry", reg],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, env=os.environ.copy())
        if killed.returncode == 0:
            completed = True
            break
        assert killed.returncode in (-9, 137), (kill_at, killed.returncode, killed.stderr[-500:])
        again = cli("export", str(out), "toy", "--registry", reg)
        assert again.returncode == 0, (kill_at, again.stderr)
        assert sorted(os.listdir(out)) == sorted([*files, "SHA256SUMS"]), (kill_at, sorted(os.listdir(out)))
        for name, data in files.items():
            assert (out / name).read_bytes() == data
    assert completed, "export never got past its renames"
