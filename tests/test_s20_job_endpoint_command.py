"""The command a job shows (`status --json`, its log's first line) carries the hub endpoint it
pinned, as an environment prefix: `HF_ENDPOINT=... prefetch get hf://... -b`.

A job started with `HF_ENDPOINT=https://hf-mirror.com` keeps its endpoint since the nineteenth
sitting (`GetRequest.hub_endpoint`), but the command shown to retype in a fresh shell lacked it:
retyped there, it asked huggingface.co. The same for MODELSCOPE_ENDPOINT. Below, the shown
command is run as it is by `sh -c` in an environment without the variable (the default hubs made
unresolvable): it completes from the job's hub.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli
from tests.ms_origin import use_endpoint
from tests.test_hf import MODEL_FILES, assert_offline_loads, hf_env, hub  # noqa: F401 (fixtures)
from tests.test_modelscope import MODEL, ms  # noqa: F401 (fixture)


def _shown_command(job: str, env: dict) -> str:
    record = json.loads(run_cli("status", job, "--json", env=env).stdout)["jobs"][0]
    return record["command"]


def _retyped(command: str, env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    """``command`` pasted into a shell (``prefetch`` on PATH runs this checkout's ``python -m prefetch``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "prefetch"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m prefetch "$@"\n')
    script.chmod(0o755)
    env = dict(env, PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    return subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def _finished(job_line: str, env: dict) -> None:
    job = json.loads(job_line)["job"]
    waited = run_cli("wait", job, "--timeout", "120", env=env)
    assert waited.returncode == 0, waited.stderr + run_cli("log", job, env=env).stdout


def test_an_hf_job_shows_its_endpoint_and_the_shown_command_retyped_asks_that_hub(hf_env, hub, home, tmp_path):
    started = run_cli("get", "hf://acme/tiny", "-b", "--json", env=hf_env)
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)["job"]
    command = _shown_command(job, hf_env)
    assert command.startswith(f"HF_ENDPOINT={hub.url} prefetch get hf://acme/tiny"), command
    log = run_cli("log", job, env=hf_env).stdout
    assert f"HF_ENDPOINT={hub.url} prefetch get" in log.splitlines()[0], log
    _finished(started.stdout, hf_env)
    fresh = {k: v for k, v in hf_env.items() if k != "HF_ENDPOINT"}  # a new terminal, a restarted kernel
    fresh["PREFETCH_RESOLVE"] = "huggingface.co=fail"  # (huggingface.co is never reached from a test)
    asked = len(hub.requests)
    again = _retyped(command + " --json", fresh, tmp_path)
    assert again.returncode == 0, again.stderr
    _finished(again.stdout, fresh)
    # The retyped command's job asked the local hub (asking huggingface.co, it would have found the
    # repo complete in the cache and said so, offline, without a request here).
    assert len(hub.requests) > asked
    assert "huggingface.co" not in run_cli("log", json.loads(again.stdout)["job"], env=fresh).stdout
    assert_offline_loads(hf_env, "acme/tiny", MODEL_FILES)


def test_an_ms_job_shows_its_endpoint_and_the_shown_command_retyped_asks_that_hub(home, ms, monkeypatch,
                                                                                   tmp_path):
    use_endpoint(monkeypatch, ms.url, home / "ms")
    env = dict(os.environ)
    started = run_cli("get", "ms://acme/tiny", "-b", "--json", env=env)
    assert started.returncode == 0, started.stderr
    command = _shown_command(json.loads(started.stdout)["job"], env)
    assert command.startswith(f"MODELSCOPE_CACHE={home / 'ms'} MODELSCOPE_ENDPOINT={ms.url} prefetch get "
                              "ms://acme/tiny"), command
    _finished(started.stdout, env)
    fresh = {k: v for k, v in env.items() if k != "MODELSCOPE_ENDPOINT"}
    fresh["PREFETCH_RESOLVE"] = "modelscope.cn=fail"
    snap = home / "ms" / "models" / "acme--tiny" / "snapshots" / "master"
    (snap / "config.json").unlink()  # something for the retyped job to fetch
    again = _retyped(command + " --json", fresh, tmp_path)
    assert again.returncode == 0, again.stderr
    _finished(again.stdout, fresh)
    assert (snap / "config.json").read_bytes() == MODEL["config.json"]


def test_the_shown_endpoint_hides_a_password_and_is_quoted_for_a_shell(home):
    """As the proxy variables a job keeps are shown (``net.proxies.shown_proxy``); and only where
    ``--mirror`` does not name the kind's endpoint (it wins: the variable would be noise)."""
    import shlex

    from prefetch.flow.request import GetRequest
    from prefetch.jobs.shown_command import describe_request

    hf = describe_request(GetRequest(names=["hf://acme/tiny"], hub_endpoint="https://alice:s3cret@hub.example/a b"))
    assert "s3cret" not in hf
    words = shlex.split(hf)
    assert words[0] == "HF_ENDPOINT=https://***@hub.example/a b" and words[1:4] == ["prefetch", "get", "hf://acme/tiny"]
    mirrored = describe_request(GetRequest(names=["hf://acme/tiny"], mirrors=["hf-mirror"],
                                           hub_endpoint="https://hub.example"))
    assert "HF_ENDPOINT" not in mirrored and "--mirror hf-mirror" in mirrored
    lfs = describe_request(GetRequest(names=["hf://acme/tiny"], mirrors=["hf-mirror"], lfs_from="ms://acme/tiny",
                                      ms_endpoint="http://ms.example"))
    assert lfs.startswith("MODELSCOPE_ENDPOINT=http://ms.example prefetch get hf://acme/tiny"), lfs
