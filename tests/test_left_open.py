"""What the previous issues left open (issue 21, item 6), each against real servers."""

from __future__ import annotations

import random

from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_faults import fault_env

SIZE = 3 << 20


def test_two_sources_with_different_etags_are_not_stitched_without_a_hash(home, origin, tmp_path):
    """Same size, other bytes, other ETags: one source's file, whole, never a mix of both."""
    mine, theirs = random.Random(61).randbytes(SIZE), random.Random(62).randbytes(SIZE)
    origin.put("data.bin", mine)
    with OriginServer() as mirror:
        mirror.put("data.bin", theirs)
        origin.rate = mirror.rate = 2_000_000  # both still running when the other answers
        proc = run_cli("get", origin.url_for("data.bin"), "--mirror", mirror.url, "--also-origin",
                       "--connections", "6", "-o", str(tmp_path / "data.bin"),
                       env=fault_env(PREFETCH_MIN_SPLIT="65536"))
        assert proc.returncode == 0, proc.stderr
        got = (tmp_path / "data.bin").read_bytes()
        assert got in (mine, theirs), "stitched from two different files"
        assert "are not mixed" in proc.stderr, proc.stderr
        assert origin.data_requests("data.bin") and mirror.data_requests("data.bin")  # both were asked
