"""`prefetch resume` of an hf:// job from a shell without the HF_ENDPOINT it started with.

The common notebook recipe for a route where huggingface.co is blocked sets the endpoint in
the kernel (`%env HF_ENDPOINT=https://hf-mirror.com`, or `os.environ[...]`), then
`!prefetch get hf://ORG/NAME -b`. The job's record kept its cache root but not its endpoint:
resumed after the kernel restarted (or from a terminal), the worker read the resuming shell's
environment and asked huggingface.co, and the job failed on the blocked route. The endpoint
variable is pinned in the record now (as the cache roots are), and used again by a resume from a
shell that sets none; a shell that sets one chooses.
"""

from __future__ import annotations

import json
import os
import time

from tests.conftest import run_cli
from tests.test_hf import MODEL_FILES, assert_offline_loads, bytes_on_disk, hf_env, hub, part_state  # noqa: F401


def _started_then_cancelled(hub, home, env) -> str:
    hub.cdn.total_rate = 256 << 10
    started = run_cli("get", "hf://acme/tiny", "-b", "--json", env=env)
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)["job"]
    deadline = time.monotonic() + 60
    while bytes_on_disk(part_state(home)) < 256 << 10:
        assert time.monotonic() < deadline, run_cli("log", job, env=env).stdout
        time.sleep(0.05)
    cancelled = run_cli("cancel", job, env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    hub.cdn.total_rate = None
    return job


def test_a_resume_from_a_shell_without_hf_endpoint_asks_the_jobs_hub(hf_env, hub, home):
    job = _started_then_cancelled(hub, home, hf_env)
    record = json.loads(run_cli("status", job, "--json", env=hf_env).stdout)["jobs"][0]
    assert record["state"] == "cancelled", record
    asked = len(hub.requests)
    fresh = {k: v for k, v in hf_env.items() if k != "HF_ENDPOINT"}  # a restarted kernel, a terminal
    fresh["PREFETCH_RESOLVE"] = "huggingface.co=fail"  # (huggingface.co never reached from a test)
    resumed = run_cli("resume", job, env=fresh)
    assert resumed.returncode == 0, resumed.stderr
    waited = run_cli("wait", job, "--timeout", "120", env=fresh)
    assert waited.returncode == 0, waited.stderr + run_cli("log", job, env=fresh).stdout
    assert len(hub.requests) > asked  # the resumed worker listed the repo at the job's hub
    assert "huggingface.co" not in run_cli("log", job, env=fresh).stdout
    assert_offline_loads(hf_env, "acme/tiny", MODEL_FILES)


def test_a_resume_from_a_shell_that_sets_another_endpoint_uses_that_one(hf_env, hub, home):
    job = _started_then_cancelled(hub, home, hf_env)
    other = dict(hf_env, HF_ENDPOINT="http://127.0.0.1:9")  # the discard port: nothing answers
    resumed = run_cli("resume", job, env=other)
    assert resumed.returncode == 0, resumed.stderr
    waited = run_cli("wait", job, "--timeout", "120", env=other)
    assert waited.returncode == 3, waited.stderr
    assert "127.0.0.1:9" in waited.stderr + run_cli("log", job, env=other).stdout


def test_an_ms_job_pins_its_endpoint_variable_too(home, monkeypatch):
    """The same for ms:// names (MODELSCOPE_ENDPOINT, else MODELSCOPE_DOMAIN), planned as a
    resumed worker plans them: from the record, in an environment without the variable."""
    from prefetch.flow.planning import plan_request
    from prefetch.flow.request import GetRequest
    from prefetch.jobs.launch import pin_request

    monkeypatch.delenv("MODELSCOPE_ENDPOINT", raising=False)
    started = dict(os.environ, MODELSCOPE_DOMAIN="http://127.0.0.1:7/ms")
    pinned = pin_request(GetRequest(names=["ms://acme/tiny"]), started)
    stored = GetRequest.from_dict(pinned.to_dict())  # (through the record)
    monkeypatch.delenv("MODELSCOPE_DOMAIN", raising=False)
    plans, _ = plan_request(stored, env=dict(os.environ))
    assert [p.endpoint for p in plans] == ["http://127.0.0.1:7/ms"]
    # a shell that sets its own chooses
    chosen, _ = plan_request(stored, env=dict(os.environ, MODELSCOPE_ENDPOINT="http://127.0.0.1:8"))
    assert [p.endpoint for p in chosen] == ["http://127.0.0.1:8"]
