"""A ``mirror use`` that could not write its config leaves no backup for ``restore`` to undo
(a real read-only tmpfs: the suite runs as root, which ignores permission bits).

``use`` backs a config up before it writes it. When the write then failed (a read-only
folder: a venv's ``--scope site`` in a read-only image, a config folder on a read-only mount;
a full disk), exit 5 and the file unchanged, its backup stayed as the newest unrestored
``use`` run. A bare ``prefetch mirror restore`` (the documented "undo the last use") then put
that backup back instead of undoing the user's last real ``use``: on the read-only folder it
failed again, exit 5, at every try (the user stuck on the mirror they meant to undo, unless
they knew to name a backup by id); where the folder had become writable it "restored" a file
that had never changed, said so, and left the real change in place.
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import run_cli
from tests.test_disk import Tmpfs

ORIGINAL = "[global]\ntimeout = 60\n"


@pytest.fixture
def locked(tmp_path):
    fs = Tmpfs(tmp_path / "ro-config").mount(size="1m")
    yield fs
    fs.unmount()


def test_a_failed_use_leaves_the_last_real_use_to_restore(home, locked):
    pip_conf = home / ".config" / "pip" / "pip.conf"
    pip_conf.parent.mkdir(parents=True)
    pip_conf.write_text(ORIGINAL)
    used = run_cli("mirror", "use", "tuna")
    assert used.returncode == 0, used.stderr
    assert "tuna" in pip_conf.read_text()

    (locked.path / "pip").mkdir()
    (locked.path / "pip" / "pip.conf").write_text(ORIGINAL)
    locked.remount("ro")
    failed = run_cli("mirror", "use", "aliyun", env={**os.environ, "XDG_CONFIG_HOME": str(locked.path)})
    assert failed.returncode == 5, failed.stderr
    assert "Read-only file system" in failed.stderr, failed.stderr

    listed = run_cli("mirror", "restore", "--list")
    assert "aliyun" not in listed.stdout, listed.stdout  # no backup of an edit that never happened

    undone = run_cli("mirror", "restore")
    assert undone.returncode == 0, undone.stderr
    assert pip_conf.read_text() == ORIGINAL, undone.stdout + undone.stderr
    assert str(pip_conf) in undone.stdout, undone.stdout
