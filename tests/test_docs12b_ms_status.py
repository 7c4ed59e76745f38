"""modelscope.md's `!prefetch status  # one row per repo: bytes, %, speed, ETA` holds while an ms:// repo downloads.

Found by running the page (tests/test_docs12b_hubs.py): an ms:// job's row stayed
``pending 0B/?`` until the whole repo was in place, and its done line said ``avg 0B/s``: the
repo had no events of its own, only its files had (hf:// repos sum their files' bytes into
their row). The repo's file goes through a throttled object store here, so that the job's
record can be seen mid-way.
"""

from __future__ import annotations

import os
import re
import time

from prefetch.jobs import list_jobs
from tests.conftest import run_cli
from tests.ms_origin import MsServer, use_endpoint

MiB = 1 << 20
FILES = {"config.json": b'{"model_type": "tiny"}\n', "model.safetensors": os.urandom(3 * MiB)}


def test_an_ms_job_row_has_bytes_rate_and_eta_while_it_downloads(home, monkeypatch):
    with MsServer(big=MiB) as ms:
        ms.add_repo("acme/tiny", FILES)
        use_endpoint(monkeypatch, ms.url, home / "ms")
        ms.cdn.total_rate = 1 * MiB  # about 3 s for the weights
        started = run_cli("get", "ms://acme/tiny", "-b")
        assert started.returncode == 0, started.stderr
        seen = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            (job,) = list_jobs()
            (row,) = job.files
            seen.append((row.state, row.bytes, row.total, row.rate, row.eta))
            if job.state in ("done", "failed"):
                break
            time.sleep(0.1)
        assert job.state == "done", seen
        assert row.name == "ms://acme/tiny" and row.total == sum(map(len, FILES.values()))
        # Mid-way: some bytes of the total, a speed and an ETA, as status shows them.
        mid = [s for s in seen if s[0] == "downloading" and 0 < s[1] < s[2] and s[3] > 0 and s[4] is not None]
        assert mid, seen
        log = run_cli("log").stdout
        done = [line for line in log.splitlines() if " ms://acme/tiny done " in line]
        assert done and not re.search(r"avg 0B/s", done[0]), log
