"""``prefetch list`` and ``clean`` for ms:// repos (``verify`` and ``rm``: tests/test_modelscope.py),
against the local ModelScope API (tests/ms_origin.py) and read back by the real modelscope client."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import sigkill_when, start_cli
from tests.test_modelscope import DATA, MODEL, client_reads, ms, ms_env  # noqa: F401 - fixtures


def _repos(out: str) -> dict:
    return {r["name"]: r for r in json.loads(out)["modelscope"]["repos"]}


def test_list_shows_repos_complete_partial_and_missing(ms_env, ms, home, cli):
    assert cli("get", "ms://acme/tiny", "ms://datasets/acme/table").returncode == 0
    listed = cli("list", "--json")
    assert listed.returncode == 0, listed.stderr
    repos = _repos(listed.stdout)
    assert repos["ms://acme/tiny"]["state"] == "complete" and repos["ms://acme/tiny"]["files"] == len(MODEL)
    assert repos["ms://datasets/acme/table"]["state"] == "complete"
    assert repos["ms://acme/tiny"]["bytes"] >= sum(len(v) for v in MODEL.values())
    plain = cli("list")
    assert "ModelScope cache:" in plain.stdout and "ms://acme/tiny" in plain.stdout, plain.stdout
    named = cli("list", "ms://acme/tiny", "ms://acme/other", "--json")
    assert named.returncode == 1  # one of them is not there
    assert {k: v["state"] for k, v in _repos(named.stdout).items()} == {"ms://acme/tiny": "complete",
                                                                        "ms://acme/other": "missing"}
    assert cli("list", "ms://acme/tiny").returncode == 0


def test_clean_removes_a_killed_runs_partial_and_get_then_completes(ms_env, ms, home, cli):
    ms.cdn.total_rate = 512 << 10  # the 3 MiB weights take ~6 s
    snap = home / "ms" / "models" / "acme--tiny" / "snapshots" / "master"
    part = snap / "model.safetensors.part"
    proc = start_cli("get", "ms://acme/tiny", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sigkill_when(proc, lambda: part.exists() and part.with_name(part.name + ".json").exists()
                 and os.path.getsize(part) > 0, what="the weights' partial")
    ms.cdn.total_rate = None
    listed = cli("list", "ms://acme/tiny", "--json")
    assert listed.returncode == 1 and _repos(listed.stdout)["ms://acme/tiny"]["state"] == "partial", listed.stdout
    young = cli("clean", "--older-than", "1h", "--json")
    assert not [r for r in json.loads(young.stdout)["removed"] if "acme--tiny" in r["path"]]
    cleaned = cli("clean", "--older-than", "0", "--json")
    assert cleaned.returncode == 0, cleaned.stderr
    removed = sorted(os.path.basename(r["path"]) for r in json.loads(cleaned.stdout)["removed"])
    assert removed == ["model.safetensors.part", "model.safetensors.part.json"]
    assert not part.exists()
    assert _repos(cli("list", "--json").stdout)["ms://acme/tiny"]["state"] == "unverified"  # no record: not complete
    done = subprocess.run([sys.executable, "-m", "prefetch", "get", "ms://acme/tiny"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    client_reads(ms_env, "acme/tiny", MODEL, offline=True)
    assert _repos(cli("list", "--json").stdout)["ms://acme/tiny"]["state"] == "complete"
    assert cli("verify", "ms://acme/tiny").returncode == 0
