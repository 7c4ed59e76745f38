"""A stop (`prefetch cancel`, Ctrl-C) that arrives at an archive's extraction ends it.

The extraction of a big archive can take minutes; the promise is that a stop ends a download
within about a second. A stop before or during the extraction ends it before its next member
(or MiB): nothing of it is placed, no temp dir stays, the verified archive is kept as its
complete ``.part``, and the next run extracts it without fetching it again.

The worker's test hook pauses it just before the extraction; `prefetch cancel` ends the
pause by its stop, so the extraction starts with the stop already set (no timing involved).
"""

from __future__ import annotations

from pathlib import Path

from tests.test_jobs import job_id_from, leftovers, poll, record, status_json
from tests.test_jobs import stop_leftover_workers  # noqa: F401 - autouse fixture
from tests.test_jobs_kill import (  # noqa: F401 - the datasets fixture
    assert_archive_in_place,
    datasets,
    no_hook_env,
)


def test_cancel_at_the_extraction_stops_it_and_resume_extracts_without_fetching(datasets, origin, home, cli,
                                                                                 monkeypatch):
    registry, _, archive, members = datasets
    monkeypatch.setenv("PREFETCH_TEST_PAUSE_AT", "extract")
    job_id = job_id_from(cli("get", "archset", "--registry", str(registry), "-b").stdout)
    log = Path(record(job_id).log)
    poll(lambda: "test hook: pausing at extract" in log.read_text(), what="the pause before the extraction")

    cancelled = cli("cancel", job_id)
    assert cancelled.returncode == 0, cancelled.stderr
    poll(lambda: not record(job_id).active, what="the worker to end")
    (job,) = status_json(cli, job_id)["jobs"]
    assert job["state"] == "cancelled" and job["exit_code"] == 7, job
    assert cli("wait", job_id).returncode == 7

    datasets_dir = home / ".keras" / "datasets"
    assert not (datasets_dir / "arch.tar.gz").exists()  # not put in place: its extraction did not happen
    assert not (datasets_dir / "arch").exists() and not (datasets_dir / "arch-target").exists()
    assert (datasets_dir / "arch.tar.gz.part").read_bytes() == archive  # kept, complete
    assert not [p for p in datasets_dir.iterdir() if ".extract-" in p.name or ".old-" in p.name]

    sent_before = origin.bytes_sent
    resumed = cli("resume", job_id, env=no_hook_env())
    assert resumed.returncode == 0, resumed.stderr
    done = cli("wait", job_id, timeout=60)
    assert done.returncode == 0, done.stderr
    assert_archive_in_place(home, archive, members)
    assert origin.bytes_sent - sent_before < len(archive)  # extracted from the kept .part, not fetched again
    assert not leftovers(home)
