"""A background ``get hf://... --cache-dir DIR`` with a relative DIR: the repo goes where the
command was typed, as in the foreground (a job's worker runs in the jobs folder)."""

from __future__ import annotations

import os

from tests.conftest import run_cli
from tests.test_hf import MODEL_FILES, hf_env, hub  # noqa: F401 (fixtures)


def test_a_relative_cache_dir_of_a_hub_job_is_where_it_was_typed(hf_env, hub, home, tmp_path):
    work = tmp_path / "notebook"
    work.mkdir()
    started = run_cli("get", "hf://acme/tiny", "--cache-dir", "hfc", "-b", env=hf_env, cwd=work)
    assert started.returncode == 0, started.stderr
    waited = run_cli("wait", env=hf_env, cwd=tmp_path, timeout=120)
    assert waited.returncode == 0, waited.stderr + waited.stdout
    snapshots = work / "hfc" / "models--acme--tiny" / "snapshots"
    assert snapshots.is_dir(), sorted(os.listdir(work))
    (snapshot,) = snapshots.iterdir()
    assert (snapshot / "config.json").read_bytes() == MODEL_FILES["config.json"]
    status = run_cli("status", "--json", env=hf_env, cwd=tmp_path)
    assert "--cache-dir " + str(work / "hfc") in status.stdout, status.stdout
