"""`get hf://ORG/NAME@COMMIT -b` or `get ms://... -b` into a read-only cache is refused in the cell.

A `-b` job's folders are checked before it starts (jobs/targets.py): Kaggle's read-only
`/kaggle/input` given as the cache is one line, exit 5, at once. The check looked at each
plan's final path only; for an `hf://` repo at a commit that is prefetch's manifest, and for an
`ms://` repo its completion record, both in the (writable) state dir, so such a job started
("started job ...") and failed in the background, its `wait` saying exit 5 later. The cache
folder the repo's files go to is checked too now.
"""

from __future__ import annotations

import os

from prefetch.errors import ExitCode
from tests.test_disk import tmpfs  # noqa: F401 (fixture)
from tests.test_hf import hf_env, hub  # noqa: F401 (fixtures)
from tests.conftest import run_cli


def _one_line(done, code: ExitCode) -> str:
    assert done.returncode == int(code), done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_hub_commit_job_into_a_read_only_cache_is_refused_at_once(hf_env, hub, home, tmpfs):  # noqa: F811
    ro = tmpfs("1m", read_only=True, name="kaggle-input-hf")
    commit = hub.repos[("model", "acme/tiny")].commit
    line = _one_line(run_cli("get", f"hf://acme/tiny@{commit}", "--cache-dir", str(ro.path), "-b", env=hf_env),
                     ExitCode.FILESYSTEM)
    assert "Read-only file system" in line and str(ro.path) in line
    jobs = home / ".prefetch" / "state" / "jobs"
    assert not jobs.exists() or not list(jobs.glob("*.json"))


def test_an_ms_job_into_a_read_only_cache_is_refused_at_once(home, tmpfs):  # noqa: F811
    ro = tmpfs("1m", read_only=True, name="kaggle-input-ms")
    env = dict(os.environ, MODELSCOPE_CACHE=str(ro.path), MODELSCOPE_ENDPOINT="http://127.0.0.1:9")
    line = _one_line(run_cli("get", "ms://acme/tiny", "-b", env=env), ExitCode.FILESYSTEM)
    assert "Read-only file system" in line and str(ro.path) in line
