"""``prefetch export DIR``: a copied file is on disk before its name appears (fsync, then the
rename, then the folder's fsync), as every final path prefetch writes. Watched with strace on a
real CLI process exporting onto another filesystem (a tmpfs: the hard link fails, the file is copied)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.test_disk import tmpfs  # noqa: F401 - fixture
from tests.test_shared_export import cached


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_an_exported_copy_is_fsynced_before_its_rename_and_the_folder_after(cli, home, origin, tmp_path, tmpfs):
    registry = cached(cli, origin, tmp_path)
    out = tmpfs("16m").path / "www"
    log = tmp_path / "strace.log"
    proc = subprocess.run(["strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2",
                           "-o", str(log), sys.executable, "-m", "prefetch", "export", str(out), "toy",
                           "--registry", registry],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy(), stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert (out / "d.bin").stat().st_nlink == 1  # copied, not linked
    calls = log.read_text().splitlines()
    synced = [i for i, c in enumerate(calls) if re.search(r"f(data)?sync\(\d+<[^>]*/\.d\.bin\.[^>]*\.tmp>", c)]
    renamed = [i for i, c in enumerate(calls) if "rename" in c and '"d.bin"' in c]
    assert synced and renamed, "\n".join(calls)
    assert synced[0] < renamed[0], "\n".join(calls)
    sums_synced = [i for i, c in enumerate(calls) if re.search(r"f(data)?sync\(\d+<[^>]*/\.SHA256SUMS\.", c)]
    assert sums_synced, "\n".join(calls)
    folder = [i for i, c in enumerate(calls) if re.search(rf"fsync\(\d+<{re.escape(str(out))}>\)", c)]
    assert folder and folder[-1] > renamed[0], "\n".join(calls)
