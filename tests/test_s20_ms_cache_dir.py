"""`prefetch get ms://OWNER/NAME --cache-dir DIR`: the repo goes under DIR, where modelscope's
`snapshot_download(..., cache_dir=DIR)` looks for it (before: DIR was ignored and the files went
to MODELSCOPE_CACHE, so the client given cache_dir=DIR downloaded them again).

modelscope 1.40.2 hands cache_dir= to modelscope-hub 0.5.1 unchanged (`compat._resolve_legacy_paths`),
whose `_repo_cache_dir_path` puts a repo at `<cache_dir>/<type>s/<owner>--<name>`, the very layout
it uses under MODELSCOPE_CACHE: what the real client reads back below, offline and online.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.conftest import run_cli
from tests.ms_origin import use_endpoint
from tests.test_modelscope import MODEL, closed_port, ms, ms_python  # noqa: F401 (fixture)


def _client_reads_cache_dir(env: dict, cache_dir: Path, *, offline: bool) -> dict[str, bytes]:
    """What the real client's snapshot_download(cache_dir=...) returns: {relative path: bytes}."""
    code = f"""
import json, os
from modelscope import snapshot_download
snap = snapshot_download("acme/tiny", cache_dir={str(cache_dir)!r}, local_files_only={offline})
out = {{"snap": snap, "files": {{}}}}
for root, dirs, names in os.walk(snap):
    for n in names:
        p = os.path.join(root, n)
        out["files"][os.path.relpath(p, snap)] = p
print(json.dumps(out))
"""
    out = ms_python(code, env)
    assert Path(out["snap"]) == cache_dir / "models" / "acme--tiny" / "snapshots" / "master"
    return {k: Path(v).read_bytes() for k, v in out["files"].items()}


def test_cache_dir_is_where_the_client_given_cache_dir_reads_the_repo(home, ms, monkeypatch, tmp_path):
    use_endpoint(monkeypatch, ms.url, home / "ms")  # MODELSCOPE_CACHE elsewhere: --cache-dir wins
    work = tmp_path / "notebook"
    work.mkdir()
    done = run_cli("get", "ms://acme/tiny", "--cache-dir", "msc", cwd=work)
    assert done.returncode == 0, done.stderr
    cache = work / "msc"
    assert not (home / "ms").exists()  # nothing under MODELSCOPE_CACHE
    offline = {**os.environ, "MODELSCOPE_ENDPOINT": closed_port()}
    assert _client_reads_cache_dir(offline, cache, offline=True) == MODEL
    before = ms.content_bytes()
    assert _client_reads_cache_dir(dict(os.environ), cache, offline=False) == MODEL  # online: lists, finds all
    assert ms.content_bytes() == before  # not one file byte downloaded again


def test_a_background_job_keeps_cache_dir_for_wait_status_and_resume(home, ms, monkeypatch, tmp_path):
    use_endpoint(monkeypatch, ms.url, home / "ms")
    work = tmp_path / "notebook"
    work.mkdir()
    cache = work / "msc"
    env = dict(os.environ)
    ms.cdn.total_rate = 256 << 10  # the 3 MiB weights take ~12 s: cancelled part-way
    started = run_cli("get", "ms://acme/tiny", "--cache-dir", "msc", "-b", "--json", cwd=work, env=env)
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)["job"]
    part = cache / "models" / "acme--tiny" / "snapshots" / "master" / "model.safetensors.part"
    deadline = time.monotonic() + 60
    while not (part.exists() and part.stat().st_size > 0):
        assert time.monotonic() < deadline, run_cli("log", job, env=env).stdout
        time.sleep(0.05)
    assert run_cli("cancel", job, env=env).returncode == 0
    ms.cdn.total_rate = None
    record = json.loads(run_cli("status", job, "--json", env=env).stdout)["jobs"][0]
    command = record["command"]
    assert command.startswith(f"MODELSCOPE_CACHE={cache} ") and " prefetch get ms://acme/tiny " in command, command
    # Resumed from another folder and a shell whose MODELSCOPE_CACHE names another cache: the job's DIR.
    other = dict(env, MODELSCOPE_CACHE=str(tmp_path / "elsewhere"))
    assert run_cli("resume", job, env=other, cwd=tmp_path).returncode == 0
    waited = run_cli("wait", job, "--timeout", "120", env=other, cwd=tmp_path)
    assert waited.returncode == 0, waited.stderr + run_cli("log", job, env=env).stdout
    assert run_cli("wait", "ms://acme/tiny", env=other, cwd=tmp_path).returncode == 0  # by name: in DIR
    assert not (tmp_path / "elsewhere").exists() and not (home / "ms").exists()
    offline = {**env, "MODELSCOPE_ENDPOINT": closed_port()}
    assert _client_reads_cache_dir(offline, cache, offline=True) == MODEL
