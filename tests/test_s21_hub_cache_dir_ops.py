"""`list`, `verify`, `rm` and `clean` with `--cache-dir DIR` find what `get ms://... --cache-dir DIR`
and `get hf://... --cache-dir DIR` placed (before: they read only MODELSCOPE_CACHE and the
environment's hub cache, so what a user fetched into DIR could not be listed, verified or removed).

Real parts: the local ModelScope and Hugging Face hubs of the suite, the real CLI, and the real
clients (modelscope's `snapshot_download(cache_dir=DIR)`, huggingface_hub's
`hf_hub_download(cache_dir=DIR)`) reading DIR offline before and after `rm`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.conftest import run_cli
from tests.ms_origin import use_endpoint
from tests.test_hf import MODEL_FILES, hf_env, hf_python, hub  # noqa: F401 (fixtures)
from tests.test_modelscope import MODEL, closed_port, ms, ms_python  # noqa: F401 (fixture)


def _flip_byte(path: Path, offset: int = 100) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def _ms_client(env: dict, cache: Path) -> dict:
    """The real client's offline snapshot_download(cache_dir=cache): {"files": {...}} or {"error": ...}."""
    code = f"""
import json, os
from modelscope import snapshot_download
try:
    snap = snapshot_download("acme/tiny", cache_dir={str(cache)!r}, local_files_only=True)
except Exception as exc:
    print(json.dumps({{"error": type(exc).__name__}}))
else:
    files = {{}}
    for root, dirs, names in os.walk(snap):
        for n in names:
            p = os.path.join(root, n)
            files[os.path.relpath(p, snap)] = open(p, "rb").read().hex()
    print(json.dumps({{"files": files}}))
"""
    return ms_python(code, {**env, "MODELSCOPE_ENDPOINT": closed_port()})


def test_ms_repo_fetched_with_cache_dir_is_listed_verified_and_removed_there(home, ms, monkeypatch, tmp_path):
    use_endpoint(monkeypatch, ms.url, home / "ms")  # MODELSCOPE_CACHE names another folder
    work = tmp_path / "notebook"
    work.mkdir()
    got = run_cli("get", "ms://acme/tiny", "--cache-dir", "msc", cwd=work)
    assert got.returncode == 0, got.stderr
    cache = work / "msc"
    snap = cache / "models" / "acme--tiny" / "snapshots" / "master"
    assert (snap / "model.safetensors").read_bytes() == MODEL["model.safetensors"]

    # list: by name, and every repo, under DIR; plain `list` reads MODELSCOPE_CACHE and shows none.
    named = run_cli("list", "ms://acme/tiny", "--cache-dir", "msc", "--json", cwd=work)
    assert named.returncode == 0, named.stdout + named.stderr
    data = json.loads(named.stdout)["modelscope"]
    assert data["root"] == str(cache) and [(r["name"], r["state"]) for r in data["repos"]] == [
        ("ms://acme/tiny", "complete")]
    every = json.loads(run_cli("list", "--cache-dir", "msc", "--json", cwd=work).stdout)["modelscope"]
    assert [(r["name"], r["state"]) for r in every["repos"]] == [("ms://acme/tiny", "complete")]
    table = run_cli("list", "--cache-dir", "msc", cwd=work)
    assert f"ModelScope cache: {cache}" in table.stdout and "ms://acme/tiny" in table.stdout, table.stdout
    plain = json.loads(run_cli("list", "--json", cwd=work).stdout)["modelscope"]
    assert plain["root"] == str(home / "ms") and plain["repos"] == []
    assert run_cli("list", "ms://acme/tiny", cwd=work).returncode == 1  # missing where MODELSCOPE_CACHE is

    # verify: every file ok under DIR; a flipped byte is exit 4 naming the file.
    ok = run_cli("verify", "ms://acme/tiny", "--cache-dir", "msc", "--json", cwd=work)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    states = {Path(r["path"]).relative_to(snap).as_posix(): r["state"] for r in json.loads(ok.stdout)}
    assert states == {name: "ok" for name in MODEL}
    assert run_cli("verify", "ms://acme/tiny", cwd=work).returncode == 2  # not in MODELSCOPE_CACHE's
    _flip_byte(snap / "model.safetensors")
    bad = run_cli("verify", "ms://acme/tiny", "--cache-dir", "msc", cwd=work)
    assert bad.returncode == 4, bad.stdout + bad.stderr
    assert f"mismatch  {snap / 'model.safetensors'}" in bad.stdout, bad.stdout

    # rm: gone from DIR, and the real client given cache_dir=DIR finds nothing offline.
    assert "model.safetensors" in _ms_client(dict(os.environ), cache)["files"]
    removed = run_cli("rm", "ms://acme/tiny", "--cache-dir", "msc", "--json", cwd=work)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert [r["path"] for r in json.loads(removed.stdout)["removed"] if r["reason"] == "repo"] == [
        str(cache / "models" / "acme--tiny")]
    assert not (cache / "models" / "acme--tiny").exists()
    assert "error" in _ms_client(dict(os.environ), cache)
    assert run_cli("list", "ms://acme/tiny", "--cache-dir", "msc", cwd=work).returncode == 1


def test_hf_repo_fetched_with_cache_dir_is_listed_verified_and_removed_there(hf_env, hub, home, tmp_path):
    work = tmp_path / "notebook"
    work.mkdir()
    got = run_cli("get", "hf://acme/tiny", "--cache-dir", "hfc", env=hf_env, cwd=work)
    assert got.returncode == 0, got.stderr
    cache = work / "hfc"
    folder = cache / "models--acme--tiny"

    listed = json.loads(run_cli("list", "--cache-dir", "hfc", "--json", env=hf_env, cwd=work).stdout)["hub"]
    assert listed["root"] == str(cache)
    assert [(r["name"], r["state"]) for r in listed["repos"]] == [("hf://acme/tiny", "complete")]
    plain = json.loads(run_cli("list", "--json", env=hf_env, cwd=work).stdout)["hub"]
    assert plain["root"] == str(home / "hf" / "hub") and plain["repos"] == []

    ok = run_cli("verify", "hf://acme/tiny", "--cache-dir", "hfc", "--json", env=hf_env, cwd=work)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert {r["state"] for r in json.loads(ok.stdout)} == {"ok"} and len(json.loads(ok.stdout)) == len(MODEL_FILES)
    assert run_cli("verify", "hf://acme/tiny", env=hf_env, cwd=work).returncode == 2  # not in HF_HOME's cache
    (snapshot,) = (folder / "snapshots").iterdir()
    _flip_byte((snapshot / "model.safetensors").resolve())  # its blob
    bad = run_cli("verify", "hf://acme/tiny", "--cache-dir", "hfc", env=hf_env, cwd=work)
    assert bad.returncode == 4, bad.stdout + bad.stderr
    assert f"mismatch  {snapshot / 'model.safetensors'}" in bad.stdout, bad.stdout

    code = f"""
from huggingface_hub import hf_hub_download
try:
    print(open(hf_hub_download("acme/tiny", "config.json", cache_dir={str(cache)!r}, local_files_only=True)).read())
except Exception as exc:
    print("error", type(exc).__name__)
"""
    before = hf_python(code, hf_env)
    assert before.returncode == 0 and before.stdout.strip() == MODEL_FILES["config.json"].decode().strip(), before
    removed = run_cli("rm", "hf://acme/tiny", "--cache-dir", "hfc", "--json", env=hf_env, cwd=work)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert str(folder) in [r["path"] for r in json.loads(removed.stdout)["removed"]]
    assert not folder.exists()
    after = hf_python(code, hf_env)
    assert after.returncode == 0 and after.stdout.startswith("error "), after


def test_clean_with_cache_dir_tidies_the_hub_caches_there(home, ms, monkeypatch, tmp_path):
    use_endpoint(monkeypatch, ms.url, home / "ms")
    cache = tmp_path / "cache"
    stale = [cache / "models" / "acme--tiny" / "snapshots" / "master" / "model.safetensors.part",
             cache / "models--acme--tiny" / "blobs" / ("ab" * 32 + ".part")]
    for part in stale:
        part.parent.mkdir(parents=True)
        part.write_bytes(b"x" * 1000)
        old = time.time() - 3600
        os.utime(part, (old, old))
    elsewhere = json.loads(run_cli("clean", "--older-than", "1m", "--json").stdout)
    assert elsewhere["removed"] == [] and all(p.exists() for p in stale)
    done = run_cli("clean", "--cache-dir", str(cache), "--older-than", "1m", "--json")
    assert done.returncode == 0, done.stderr
    assert sorted(r["path"] for r in json.loads(done.stdout)["removed"]) == sorted(map(str, stale))
    assert not any(p.exists() for p in stale)


def test_the_python_api_removes_a_repo_from_the_cache_ensure_filled(home, ms, monkeypatch, tmp_path):
    """`prefetch.remove(..., ms_cache=DIR)` / `hub_cache=` as `ensure(..., ms_cache=DIR)` filled it."""
    import prefetch

    use_endpoint(monkeypatch, ms.url, home / "ms")
    cache = tmp_path / "msc"
    prefetch.ensure("ms://acme/tiny", ms_cache=str(cache), progress=False)
    folder = cache / "models" / "acme--tiny"
    assert (folder / "snapshots" / "master" / "config.json").read_bytes() == MODEL["config.json"]
    assert prefetch.remove("ms://acme/tiny").removed == [] and folder.exists()  # MODELSCOPE_CACHE's: not there
    result = prefetch.remove("ms://acme/tiny", ms_cache=cache)
    assert [r.path for r in result.removed if r.reason == "repo"] == [str(folder)] and not folder.exists()
    assert "error" in _ms_client(dict(os.environ), cache)
