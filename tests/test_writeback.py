"""A download that will be ``fdatasync``-ed before its rename starts its disk writes early.

Every few MiB written, the ``.part`` asks the kernel to start writing its dirty pages
(``sync_file_range(SYNC_FILE_RANGE_WRITE)``, ``fs.files.start_writeback``): the disk
writes overlap the transfer, and the ``fdatasync`` before the rename waits for the last
pages only. Seen from outside with ``strace`` (the test is skipped where it cannot run):
the request to the kernel, and none when ``PREFETCH_SYNC=0`` (no final sync to shorten).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nginx import NginxServer, nginx_binary


def _strace_works() -> bool:
    if shutil.which("strace") is None or not sys.platform.startswith("linux"):
        return False
    probe = subprocess.run(["strace", "-f", "-o", os.devnull, "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


pytestmark = [
    pytest.mark.skipif(not _strace_works(), reason="needs a working strace (Linux, ptrace allowed)"),
    pytest.mark.skipif(nginx_binary() is None, reason="needs nginx"),
]


def _get_traced(url: str, out: Path, log: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["strace", "-f", "-e", "trace=sync_file_range,fdatasync", "-o", str(log),
                           sys.executable, "-m", "prefetch", "get", url, "-o", str(out), "-q"],
                          capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL)


def test_a_big_download_starts_its_disk_writes_before_the_final_sync(home, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    data = os.urandom(40 << 20)
    (root / "big.bin").write_bytes(data)
    with NginxServer(root) as server:
        url = server.url_for("big.bin")
        out, log = tmp_path / "big.bin", tmp_path / "trace.txt"
        proc = _get_traced(url, out, log, os.environ.copy())
        assert proc.returncode == 0, proc.stderr
        assert out.read_bytes() == data
        calls = log.read_text()
        assert "sync_file_range(" in calls
        assert "fdatasync(" in calls  # ... and the file is still synced before its rename

        # Without the final sync (PREFETCH_SYNC=0) there is nothing to start early.
        out.unlink()
        proc = _get_traced(url, out, log, {**os.environ, "PREFETCH_SYNC": "0"})
        assert proc.returncode == 0, proc.stderr
        assert out.read_bytes() == data
        assert "sync_file_range(" not in log.read_text()
