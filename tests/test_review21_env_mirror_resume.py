"""A job started from a shell whose ``PREFETCH_DATASET_MIRROR`` holds a password resumes from a shell
that sets the variable again (real jobs, a real origin as the mirror).

The job pins the variable as its mirror and keeps the password out of its record (``***``), as
78f07cd made it. But its resume was refused whatever the shell said ("--mirror
https://alice:***@...: run the same `prefetch get ... --mirror URL` again", a ``--mirror`` the
user never typed), and setting the variable again, as the refusal of an endpoint or a proxy with
a password asks, changed nothing: such a job could never be resumed. Now a shell that sets the
variable to the same mirror again gives it its password; one that sets another mirror, or none,
is refused in one line naming the variable (the job's files are never sent elsewhere).
"""

from __future__ import annotations

import os

from tests.conftest import run_cli
from tests.test_jobs import job_id_from, stop_leftover_workers, synth  # noqa: F401 (fixtures)
from tests.test_proxies import everything_written


def test_a_job_with_the_environments_mirror_password_resumes_once_the_variable_is_set_again(
        synth, origin, home, tmp_path):
    registry, data = synth
    mirror = origin.url_for("mirror/").replace("http://", "http://alice:MirrPass@")
    shell = {k: v for k, v in os.environ.items() if k != "PREFETCH_DATASET_MIRROR"}
    env = dict(shell, PREFETCH_DATASET_MIRROR=mirror, PREFETCH_RETRIES="1")
    started = run_cli("get", "synth", "--registry", str(registry), "-b", env=env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    job = job_id_from(started.stdout)
    failed = run_cli("wait", job, env=env, cwd=tmp_path, timeout=120)
    assert failed.returncode == 3, (failed.stdout, failed.stderr)  # (the mirror lacks the file yet)
    origin.put("mirror/synth.bin", data)

    fresh = run_cli("resume", job, env=shell, cwd=tmp_path)
    other = run_cli("resume", job, env=dict(shell, PREFETCH_DATASET_MIRROR=origin.url_for("elsewhere/").replace(
        "http://", "http://alice:MirrPass@")), cwd=tmp_path)
    for refused in (fresh, other):
        assert refused.returncode == 2, (refused.stdout, refused.stderr)
        assert "set PREFETCH_DATASET_MIRROR" in refused.stderr and "MirrPass" not in refused.stderr, refused.stderr
    assert not any("/elsewhere/" in r.path for r in origin.requests)

    again = run_cli("resume", job, env=env, cwd=tmp_path)
    assert again.returncode == 0, (again.stdout, again.stderr)
    waited = run_cli("wait", job, env=env, cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, (waited.stdout, waited.stderr)
    assert [p.read_bytes() for p in home.rglob("synth.bin")] == [data]
    assert any(r.path.endswith("/mirror/synth.bin") and r.method == "GET" for r in origin.requests)
    assert "MirrPass" not in everything_written(home)
