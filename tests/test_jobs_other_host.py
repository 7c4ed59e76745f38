"""A job record from another machine sharing the state dir, dated by a clock that is not ours.

Another host's worker is judged by its heartbeat (its record rewritten at least every 20 s):
the record's ``updated`` time, or the file's mtime (the file server's clock), whichever is
later. A record dated years ahead (a skewed clock, a record edited by hand) kept such a job
"running" for ever: ``prefetch wait`` waited for good. A time further ahead than the staleness
window is no sign of life now; a fresh file still is, whatever the other clock says.
A real background job makes the record; only its host and times are then changed.
"""

from __future__ import annotations

import json
import os
import time

from tests.origin import OriginServer

YEARS = 10 * 365 * 86400


def _job(cli, tmp_path) -> tuple[str, object]:
    with OriginServer() as origin:
        origin.put("a.bin", b"a" * 1000)
        started = cli("get", origin.url_for("a.bin"), "-o", str(tmp_path / "a.bin"), "-b")
        assert started.returncode == 0, started.stderr
        assert cli("wait").returncode == 0
    job_id = started.stdout.split("started job ")[1].split()[0]
    (path,) = [p for p in (tmp_path / "home").rglob(f"{job_id}.json")]
    return job_id, path


def _as_other_host(path, *, updated: float, mtime: float) -> None:
    record = json.loads(path.read_text())
    record.update(state="running", host="elsewhere", updated=updated, finished=None, exit_code=None)
    path.write_text(json.dumps(record))
    os.utime(path, (mtime, mtime))


def _state(cli, job_id: str) -> str:
    shown = cli("status", job_id, "--json")
    assert shown.returncode == 0, shown.stderr
    (job,) = json.loads(shown.stdout)["jobs"]
    return job["state"]


def test_a_record_dated_years_ahead_is_no_sign_of_life(home, tmp_path, cli):
    job_id, path = _job(cli, tmp_path)
    _as_other_host(path, updated=time.time() + YEARS, mtime=time.time() - 3600)
    waited = cli("wait", job_id, "--timeout", "20")
    assert waited.returncode == 7, (waited.stdout, waited.stderr)  # interrupted: its own outcome, at once
    assert _state(cli, job_id) == "interrupted"


def test_another_hosts_fresh_record_is_alive_whatever_its_clock_says(home, tmp_path, cli):
    """Its clock years ahead, or an hour behind: the file rewritten just now is the heartbeat."""
    job_id, path = _job(cli, tmp_path)
    for updated in (time.time() + YEARS, time.time() - 3600):
        _as_other_host(path, updated=updated, mtime=time.time())
        assert _state(cli, job_id) == "running"
        assert cli("wait", job_id, "--timeout", "1").returncode != 7  # still waited for (timed out)
