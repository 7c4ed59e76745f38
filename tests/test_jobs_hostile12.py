"""The twelfth sitting's hostile review of background jobs: records tampered with."""

from __future__ import annotations

import json

from prefetch.fs.paths import state_dir
from tests.conftest import run_cli
from tests.test_store import refused_url


def test_a_record_with_an_exit_code_prefetch_has_not_is_corrupt(home):
    """`wait` exits with the job's recorded exit code: one edited to 999 (or -9) made it exit
    231 (247), codes docs/exit-codes.md does not have. Such a record is corrupt: exit 1, one line."""
    proc = run_cli("get", refused_url("x.bin"), "-b", "--retries", "0", "-o", str(home / "x.bin"))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("wait")
    assert proc.returncode == 3, proc.stderr  # refused: the documented network exit
    (record,) = (state_dir() / "jobs").glob("*.json")
    good = json.loads(record.read_text())
    for bad in (999, -9, 8, 256 + 3):
        data = dict(good, exit_code=bad)
        record.write_text(json.dumps(data))
        proc = run_cli("wait", good["id"])
        assert proc.returncode == 1, (bad, proc.returncode, proc.stderr)
        assert "corrupt" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
        proc = run_cli("status", "--all")
        assert proc.returncode == 0 and "corrupt" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
