"""A stopped job that was updating a Hugging Face repo is not "in place" because of an older commit.

An `hf://ORG/NAME` job's final path is the repo's ref (`refs/main`, written last). When the
repo had been fetched before and its branch has moved on since, the ref already exists, naming
the old commit. A `get -b` of the new commit that was cancelled (or whose worker died) was then
taken as superseded: `prefetch wait` said "stopped earlier, but its files are in place now" and
exited 0, `wait hf://ORG/NAME` said "in place", `status` dropped the resume hint and `jobs clean`
removed an interrupted job, while the ref still named the old commit and huggingface_hub went on
loading the old model offline. A ref counts for a stopped job only when written since it started.
"""

from __future__ import annotations

import hashlib
import json
import time

from tests.conftest import run_cli
from tests.test_hf import MODEL_FILES, assert_offline_loads, cache, hf_env, hub  # noqa: F401 (fixtures)

NEW_WEIGHTS = hashlib.sha256(b"v2").digest() * (1 << 16)  # 2 MiB


def _moved_on_then_stopped(hf_env, hub, home) -> tuple[str, str, str]:
    """(job, old commit, new commit): the repo fetched, its main moved on, a job for it cancelled mid-file."""
    assert run_cli("get", "hf://acme/tiny", env=hf_env).returncode == 0
    old = hub.repos[("model", "acme/tiny")].commit
    new = hub.add_repo("acme/tiny", dict(MODEL_FILES, **{"model.safetensors": NEW_WEIGHTS}),
                       lfs={"model.safetensors"}).commit
    assert new != old
    hub.cdn.total_rate = 128 << 10
    started = run_cli("get", "hf://acme/tiny", "-b", "--json", env=hf_env)
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)["job"]
    part = cache(home) / "models--acme--tiny" / "blobs" / f"{hashlib.sha256(NEW_WEIGHTS).hexdigest()}.part"
    deadline = time.monotonic() + 60
    while not part.exists():
        assert time.monotonic() < deadline, run_cli("log", job, env=hf_env).stdout
        time.sleep(0.05)
    assert run_cli("cancel", job, env=hf_env).returncode == 0
    hub.cdn.total_rate = None
    return job, old, new


def test_wait_after_a_stopped_update_says_it_stopped(hf_env, hub, home):
    job, old, new = _moved_on_then_stopped(hf_env, hub, home)
    ref = cache(home) / "models--acme--tiny" / "refs" / "main"
    assert ref.read_text() == old
    waited = run_cli("wait", env=hf_env)
    assert waited.returncode == 7, waited.stdout + waited.stderr
    assert f"prefetch resume {job}" in waited.stderr
    named = run_cli("wait", "hf://acme/tiny", env=hf_env)
    assert named.returncode == 7, named.stdout + named.stderr
    status = run_cli("status", env=hf_env)
    assert f"continue with `prefetch resume {job}`" in status.stdout + status.stderr
    # the job is still there to resume, and a resume completes the new commit
    assert run_cli("resume", job, env=hf_env).returncode == 0
    assert run_cli("wait", job, "--timeout", "120", env=hf_env).returncode == 0
    assert ref.read_text() == new
    assert_offline_loads(hf_env, "acme/tiny", dict(MODEL_FILES, **{"model.safetensors": NEW_WEIGHTS}))


def test_a_later_get_that_completes_the_new_commit_supersedes_the_stopped_job(hf_env, hub, home):
    job, old, new = _moved_on_then_stopped(hf_env, hub, home)
    assert run_cli("get", "hf://acme/tiny", env=hf_env).returncode == 0
    assert (cache(home) / "models--acme--tiny" / "refs" / "main").read_text() == new
    waited = run_cli("wait", env=hf_env)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert f"{job}: stopped earlier, but its files are in place now" in waited.stdout
    assert run_cli("wait", "hf://acme/tiny", env=hf_env).returncode == 0
