"""SIGKILL a `get` of a file with an extra name (a registry's ``also``) at each of its renames.

The extra name is linked to the verified ``.part`` just before the ``.part`` becomes the final
name. A kill between the two left the ``.part`` with two names, and the next `get` refused it
for ever ("a hard link ... which prefetch did not create", exit 5). Whatever the moment, the
same command must end with both names holding the file and nothing else left. Real CLI,
real nginx; strace kills at the Nth rename.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import run_cli


def _strace_works() -> bool:
    if shutil.which("strace") is None:
        return False
    return subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "true"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _strace_works(), reason="needs strace (and ptrace) to kill at a rename")


def test_get_killed_at_each_rename_then_rerun_places_both_names(home, tmp_path, nginx_origin):
    data = os.urandom(3 << 20)
    (nginx_origin.root / "d.bin").write_bytes(data)
    registry = tmp_path / "reg.toml"
    registry.write_text(f'[al]\n[[al.files]]\nurl = "{nginx_origin.url_for("d.bin")}"\n'
                        f'sha256 = "{hashlib.sha256(data).hexdigest()}"\nalso = ["alias.bin"]\n')
    completed = False
    for kill_at in range(1, 12):
        cache = tmp_path / f"keras{kill_at}"
        env = dict(os.environ, KERAS_HOME=str(cache))
        args = ["get", "al", "--registry", str(registry)]
        killed = subprocess.run(["strace", "-f", "-qq", "-o", os.devnull, "-e", "trace=rename,renameat,renameat2",
                                 "-e", f"inject=rename,renameat,renameat2:signal=SIGKILL:when={kill_at}",
                                 sys.executable, "-m", "prefetch", *args],
                                env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        if killed.returncode == 0:
            completed = True
            break
        assert killed.returncode in (-9, 137), (kill_at, killed.returncode, killed.stderr[-500:])
        again = run_cli(*args, env=env)
        assert again.returncode == 0, (kill_at, again.stderr)
        datasets = cache / "datasets"
        assert sorted(os.listdir(datasets)) == ["alias.bin", "d.bin"], (kill_at, sorted(os.listdir(datasets)))
        assert (datasets / "d.bin").read_bytes() == data and (datasets / "alias.bin").read_bytes() == data
    assert completed, "get never got past its renames"
