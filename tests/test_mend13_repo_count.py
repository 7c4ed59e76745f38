"""A background ``get hf://ORG/NAME`` job places a repo's files: ``wait``, ``status --json``
and the job's repr count them (it said "1 file in place" for a repo of six)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import run_cli
from tests.test_hf import MODEL_FILES, hf_env, hub  # noqa: F401 (fixtures)


def test_wait_and_status_count_a_repo_jobs_files(hf_env, hub, home, tmp_path):
    started = run_cli("get", "hf://acme/tiny", "-b", env=hf_env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", env=hf_env, cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, waited.stderr + waited.stdout
    assert f"done ({len(MODEL_FILES)} files in place)" in waited.stdout, waited.stdout
    table = run_cli("status", env=hf_env, cwd=tmp_path).stdout
    assert f"hf://acme/tiny ({len(MODEL_FILES)} files)  done" in table, table
    status = json.loads(run_cli("status", "--json", env=hf_env, cwd=tmp_path).stdout)
    (entry,) = status["jobs"][0]["files"]
    assert entry["name"] == "hf://acme/tiny" and entry["count"] == len(MODEL_FILES), entry
    # The notebook's repr of the job (`prefetch.status()`, `prefetch.wait()`'s jobs) says the same.
    code = "import prefetch; print(repr(prefetch.status()[0]))"
    out = subprocess.run([sys.executable, "-c", code], env=hf_env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert f": {len(MODEL_FILES)} files," in out.stdout, out.stdout + out.stderr


def test_a_cached_repo_job_counts_its_files_too(hf_env, hub, home, tmp_path):
    first = run_cli("get", "hf://datasets/acme/table", env=hf_env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    started = run_cli("get", "hf://datasets/acme/table", "-b", env=hf_env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", env=hf_env, cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, waited.stderr + waited.stdout
    assert "done (3 files in place)" in waited.stdout, waited.stdout


def test_an_ms_repo_job_counts_its_files(home, monkeypatch, tmp_path):
    from tests.ms_origin import MsServer, use_endpoint

    files = {"config.json": b'{"model_type": "tiny"}\n', "a/b.txt": b"b\n", "weights.bin": b"w" * 4096}
    with MsServer() as ms:
        ms.add_repo("acme/tiny", files)
        use_endpoint(monkeypatch, ms.url, home / "ms")
        started = run_cli("get", "ms://acme/tiny", "-b", cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        waited = run_cli("wait", cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, waited.stderr + waited.stdout
    assert "done (3 files in place)" in waited.stdout, waited.stdout
