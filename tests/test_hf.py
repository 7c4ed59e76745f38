"""hf:// repos into the Hugging Face cache, checked by the real huggingface_hub (loopback hub only)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import sigkill_when, start_cli
from tests.conftest import run_cli
from tests.faults_net_helpers import closed_port
from tests.hub_origin import HubServer

WEIGHTS = hashlib.sha256(b"seed").digest() * (3 << 15)  # 3 MiB, not compressible by accident
MODEL_FILES = {
    "config.json": b'{"model_type": "tiny", "hidden_size": 8}\n',
    "tokenizer.json": b'{"version": "1.0", "vocab": {"a": 0, "b": 1}}\n' * 40,
    "model.safetensors": WEIGHTS,
    "nested/dir/README.md": b"# nested\n",
    "empty/__init__.py": b"",  # real repos have empty files
    "same_config.json": b'{"model_type": "tiny", "hidden_size": 8}\n',  # one blob, two snapshot entries
}
DATA_FILES = {"data/train.csv": b"x,y\n1,2\n" * 1000, "data/big.parquet": os.urandom(1 << 20), "README.md": b"# data\n"}


@pytest.fixture
def hub():
    with HubServer() as server:
        server.add_repo("acme/tiny", MODEL_FILES, lfs={"model.safetensors"})
        server.add_repo("acme/table", DATA_FILES, repo_type="dataset", lfs={"data/big.parquet"})
        yield server


@pytest.fixture
def hf_env(home, hub, monkeypatch) -> dict:
    """HF_ENDPOINT at the local hub, a fresh HF_HOME, no token anywhere."""
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH",
                "HF_HUB_OFFLINE", "IPYTHONDIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    return os.environ.copy()


def cache(home: Path) -> Path:
    return home / "hf" / "hub"


def hf_python(code: str, env: dict, *, offline: bool = True) -> subprocess.CompletedProcess:
    """Run ``code`` with the real huggingface_hub in a fresh interpreter (it reads its env at import)."""
    env = dict(env)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def assert_offline_loads(env: dict, repo_id: str, files: dict[str, bytes], *, repo_type: str = "model") -> None:
    """hf_hub_download and snapshot_download, offline, give paths holding exactly ``files``."""
    code = f"""
import json, os
from huggingface_hub import hf_hub_download, snapshot_download
out = {{"single": {{}}, "snapshot": {{}}}}
for name in {sorted(files)!r}:
    out["single"][name] = hf_hub_download({repo_id!r}, name, repo_type={repo_type!r}, local_files_only=True)
snap = snapshot_download({repo_id!r}, repo_type={repo_type!r}, local_files_only=True)
for root, dirs, names in os.walk(snap):
    for n in names:
        p = os.path.join(root, n)
        out["snapshot"][os.path.relpath(p, snap)] = p
print(json.dumps(out))
"""
    done = hf_python(code, env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {k: Path(v).read_bytes() for k, v in out["single"].items()} == files
    assert {k: Path(v).read_bytes() for k, v in out["snapshot"].items()} == files


def blob_name(data: bytes, *, lfs: bool) -> str:
    if lfs:
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_get_places_a_model_exactly_where_huggingface_hub_reads_it(hf_env, hub, home, cli):
    done = cli("get", "hf://acme/tiny")
    assert done.returncode == 0, done.stderr
    repo = cache(home) / "models--acme--tiny"
    commit = hub.repos[("model", "acme/tiny")].commit
    assert (repo / "refs" / "main").read_text() == commit  # no newline, as huggingface_hub writes it
    for name, data in MODEL_FILES.items():
        pointer = repo / "snapshots" / commit / name
        assert pointer.is_symlink() and not os.path.isabs(os.readlink(pointer))
        blob = repo / "blobs" / blob_name(data, lfs=name == "model.safetensors")
        assert pointer.resolve() == blob.resolve() and blob.read_bytes() == data
    assert sorted(p.name for p in (repo / "blobs").iterdir()) == sorted(
        {blob_name(d, lfs=n == "model.safetensors") for n, d in MODEL_FILES.items()})  # no .part left
    assert_offline_loads(hf_env, "acme/tiny", MODEL_FILES)
    assert str(repo / "snapshots" / commit) in done.stdout


def test_dataset_repo_and_a_paginated_tree(hf_env, hub, home, cli):
    hub.page_size = 2  # three files: two pages
    done = cli("get", "hf://datasets/acme/table")
    assert done.returncode == 0, done.stderr
    assert (cache(home) / "datasets--acme--table" / "refs" / "main").is_file()
    assert sum("/tree/" in r.path for r in hub.requests) == 2
    assert_offline_loads(hf_env, "acme/table", DATA_FILES, repo_type="dataset")
    hub.add_repo("acme/demo", {"app.py": b"print('hi')\n"}, repo_type="space")
    assert cli("get", "hf://spaces/acme/demo").returncode == 0
    assert (cache(home) / "spaces--acme--demo" / "refs" / "main").is_file()
    assert_offline_loads(hf_env, "acme/demo", {"app.py": b"print('hi')\n"}, repo_type="space")


def test_prefetch_reuses_blobs_huggingface_hub_downloaded(hf_env, hub, home, cli):
    online = hf_python("from huggingface_hub import snapshot_download; print(snapshot_download('acme/tiny'))",
                       hf_env, offline=False)
    assert online.returncode == 0, online.stderr
    assert hub.file_requests(), "huggingface_hub should have downloaded from the local hub"
    before_requests, before_bytes = len(hub.file_requests(method=None)), hub.content_bytes()
    done = cli("get", "hf://acme/tiny", "--json")
    assert done.returncode == 0, done.stderr
    assert len(hub.file_requests(method=None)) == before_requests and hub.content_bytes() == before_bytes
    statuses = {r["name"]: r["status"] for r in json.loads(done.stdout)}
    assert statuses["hf://acme/tiny"] == "cached"
    assert {statuses[f"acme/tiny/{n}"] for n in MODEL_FILES} == {"cached"}
    assert_offline_loads(hf_env, "acme/tiny", MODEL_FILES)


def test_huggingface_hub_online_finds_what_prefetch_placed(hf_env, hub, home, cli):
    assert cli("get", "hf://acme/tiny").returncode == 0
    before = hub.content_bytes()
    code = "from huggingface_hub import snapshot_download; import sys; print(snapshot_download('acme/tiny'))"
    online = hf_python(code, hf_env, offline=False)
    assert online.returncode == 0, online.stderr
    assert hub.content_bytes() == before  # it found every blob in place


def test_include_and_exclude_keep_the_others_out(hf_env, hub, home, cli):
    done = cli("get", "hf://acme/tiny", "--include", "*.json", "--include", "nested/", "--exclude", "tokenizer*")
    assert done.returncode == 0, done.stderr
    commit = hub.repos[("model", "acme/tiny")].commit
    snap = cache(home) / "models--acme--tiny" / "snapshots" / commit
    kept = sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_symlink())
    assert kept == ["config.json", "nested/dir/README.md", "same_config.json"]
    assert not any("model.safetensors" in r.path or "tokenizer" in r.path for r in hub.file_requests(method=None))
    assert hub.cdn.bytes_sent == 0
    nothing = cli("get", "hf://acme/tiny", "--include", "*.bin")
    assert nothing.returncode == 2 and "no file" in nothing.stderr


def test_gated_repo_needs_a_token_which_is_never_logged(hf_env, hub, home, cli, monkeypatch):
    hub.add_repo("acme/gated", MODEL_FILES, lfs={"model.safetensors"}, gated=True)
    refused = cli("get", "hf://acme/gated")
    assert refused.returncode == 3
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("prefetch: error:") and "token is needed" in lines[0]
    assert "HF_TOKEN" in lines[0] and "Traceback" not in refused.stderr
    assert not (cache(home) / "models--acme--gated" / "snapshots").exists()

    # The token file huggingface_hub's `hf auth login` writes, in a background job.
    token_file = home / "hf" / "token"
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text(hub.token + "\n")
    started = cli("get", "hf://acme/gated", "-b", "--json")
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)["job"]
    waited = cli("wait", job, "--timeout", "120")
    assert waited.returncode == 0, waited.stderr + cli("log", job).stdout
    env = dict(hf_env, HF_TOKEN=hub.token)
    assert_offline_loads(env, "acme/gated", MODEL_FILES)
    # Sent to the hub, never to the CDN, and nowhere on disk or in output.
    assert any(r.headers.get("Authorization") == f"Bearer {hub.token}" for r in hub.requests)
    assert not any("Authorization" in r.headers for r in hub.cdn.requests)
    status = cli("status", job, "--json")
    for text in (refused.stdout, refused.stderr, started.stdout, waited.stdout, waited.stderr, status.stdout,
                 cli("log", job).stdout):
        assert hub.token not in text
    for path in [*(home / ".prefetch").rglob("*"), *(home / "hf" / "hub").rglob("*")]:
        if path.is_file() and not path.is_symlink():
            assert hub.token.encode() not in path.read_bytes(), path

    # HF_TOKEN itself, foreground, into an empty cache; a wrong token gets a 403 line, exit 3.
    token_file.unlink()
    import shutil

    shutil.rmtree(cache(home) / "models--acme--gated")
    assert cli("get", "hf://acme/gated").returncode == 3
    monkeypatch.setenv("HF_TOKEN", hub.token)
    again = cli("get", "hf://acme/gated")
    assert again.returncode == 0, again.stderr
    assert hub.token not in again.stdout + again.stderr
    assert_offline_loads(os.environ.copy(), "acme/gated", MODEL_FILES)
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    wrong = cli("get", "hf://acme/gated")
    assert wrong.returncode == 3 and "403" in wrong.stderr and "hf_wrong" not in wrong.stderr


def test_wrong_lfs_hash_exit_4_and_no_snapshot_entry(hf_env, hub, home, cli):
    bad = bytearray(WEIGHTS)
    bad[12345] ^= 0xFF
    repo = hub.add_repo("acme/broken", MODEL_FILES, lfs={"model.safetensors"}, serve={"model.safetensors": bytes(bad)})
    done = cli("get", "hf://acme/broken")
    assert done.returncode == 4, done.stderr
    assert "sha256 mismatch" in done.stderr
    folder = cache(home) / "models--acme--broken"
    snap = folder / "snapshots" / repo.commit
    assert not (snap / "model.safetensors").exists() and not (snap / "model.safetensors").is_symlink()
    assert (snap / "config.json").is_symlink()  # the good files are in place ...
    assert not (folder / "refs" / "main").exists()  # ... but the revision is not complete
    assert not list((folder / "blobs").glob(hashlib.sha256(WEIGHTS).hexdigest() + "*"))


def part_state(home: Path) -> Path:
    sha = hashlib.sha256(WEIGHTS).hexdigest()
    return cache(home) / "models--acme--tiny" / "blobs" / f"{sha}.part.json"


def bytes_on_disk(state: Path) -> int:
    try:
        return sum(b - a for a, b in json.loads(state.read_text())["done"])
    except (OSError, ValueError, KeyError):
        return 0


def kept_ranges(home: Path) -> list[tuple[int, int]]:
    return [(a, b) for a, b in json.loads(part_state(home).read_text())["done"]]


def assert_no_kept_byte_asked_again(requests, kept: list[tuple[int, int]]) -> None:
    """Every request after the interruption asks only for bytes that were not on disk."""
    asked = [r for r in requests if r.method == "GET"]
    assert asked, "the resume sent no request for the rest"
    for r in asked:
        first, _, last = (r.range or "").removeprefix("bytes=").partition("-")
        assert first, f"a request without a Range: {r.headers}"
        lo, hi = int(first), int(last) + 1 if last else len(WEIGHTS)
        assert all(hi <= a or lo >= b for a, b in kept), (r.range, kept)


def test_sigkill_mid_lfs_file_then_get_again_resumes(hf_env, hub, home):
    hub.cdn.total_rate = 512 << 10  # one slow link: 3 MiB take ~6 s
    proc = start_cli("get", "hf://acme/tiny", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sigkill_when(proc, lambda: bytes_on_disk(part_state(home)) >= 1 << 20, what="1 MiB of the weights on disk")
    kept, ranges = bytes_on_disk(part_state(home)), kept_ranges(home)
    hub.cdn.total_rate = None
    first_new = len(hub.cdn.requests)  # the killed run's connections may still be counting bytes
    done = subprocess.run([sys.executable, "-m", "prefetch", "get", "hf://acme/tiny"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert_no_kept_byte_asked_again(hub.cdn.requests[first_new:], ranges)
    resent = sum(r.body_bytes_sent for r in hub.cdn.requests[first_new:])
    assert resent < len(WEIGHTS) - kept // 2, (resent, kept)  # the server may write a little past what is read
    assert "resuming" in done.stderr
    assert any(r.headers.get("If-Range") for r in hub.cdn.requests[-8:])
    assert_offline_loads(hf_env, "acme/tiny", MODEL_FILES)


def test_background_get_then_wait_and_list(hf_env, hub, home, cli):
    started = cli("get", "hf://acme/tiny", "-b")
    assert started.returncode == 0, started.stderr
    waited = cli("wait", "--timeout", "120")
    assert waited.returncode == 0, waited.stderr
    assert cli("wait", "hf://acme/tiny").returncode == 0  # by name: its ref is in place
    absent = cli("wait", "hf://datasets/acme/table")
    assert absent.returncode == 1 and "refs/main" in absent.stderr
    status = json.loads(cli("status", "--json").stdout)
    text = json.dumps(status)
    assert "hf://acme/tiny" in text and "done" in text
    assert_offline_loads(hf_env, "acme/tiny", MODEL_FILES)
    listed = cli("list")
    assert listed.returncode == 0 and "hf://acme/tiny" in listed.stdout and "complete" in listed.stdout
    data = json.loads(cli("list", "--json").stdout)
    repo = next(r for r in data["hub"]["repos"] if r["name"] == "hf://acme/tiny")
    assert repo["revisions"] == {"main": hub.repos[("model", "acme/tiny")].commit}


def test_endpoint_from_mirror_use_tool_hf_and_from_mirror_flag(hf_env, hub, home, cli, monkeypatch):
    monkeypatch.delenv("HF_ENDPOINT")
    config = home / ".prefetch" / "config"
    config.mkdir(parents=True)
    (config / "mirrors.toml").write_text(f'[mirrors.localhub]\nhf = "{hub.url}"\n')
    used = cli("mirror", "use", "localhub", "--tool", "hf")
    assert used.returncode == 0, used.stderr
    done = cli("get", "hf://acme/tiny", "--include", "config.json")
    assert done.returncode == 0, done.stderr
    # --mirror beats the persisted endpoint: a dead endpoint fails with exit 3, naming it.
    dead = cli("get", "hf://datasets/acme/table", "--mirror", "http://127.0.0.1:9/")
    assert dead.returncode == 3 and "127.0.0.1:9" in dead.stderr
    flag = cli("get", "hf://datasets/acme/table", "--mirror", hub.url)
    assert flag.returncode == 0, flag.stderr


@pytest.mark.parametrize("name", ["hf://", "hf://a/b/c", "hf://acme/x@../../etc", "hf://acme/../x", "hf://ac--me/x"])
def test_bad_hub_names_are_usage_errors(hf_env, cli, name):
    done = cli("get", name)
    assert done.returncode == 2 and done.stderr.startswith("prefetch: error:") and "Traceback" not in done.stderr


def test_unknown_repo_is_one_line_exit_3(hf_env, cli):
    done = cli("get", "hf://acme/nothing")
    assert done.returncode == 3 and "404" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_verify_rehashes_a_cached_repo(hf_env, hub, home, cli):
    assert cli("get", "hf://acme/tiny").returncode == 0
    ok = cli("verify", "hf://acme/tiny", "--json")
    assert ok.returncode == 0, ok.stderr
    states = {Path(r["path"]).name: (r["state"], r["algorithm"]) for r in json.loads(ok.stdout)}
    assert states["model.safetensors"] == ("ok", "sha256") and states["config.json"] == ("ok", "git-sha1")
    blob = cache(home) / "models--acme--tiny" / "blobs" / hashlib.sha256(WEIGHTS).hexdigest()
    data = bytearray(blob.read_bytes())
    data[0] ^= 1
    blob.write_bytes(bytes(data))
    bad = cli("verify", "hf://acme/tiny")
    assert bad.returncode == 4 and "mismatch" in bad.stdout and "delete the blob" in bad.stderr
    assert cli("verify", "hf://acme/other").returncode == 2


def test_background_job_cancel_then_resume_keeps_the_bytes(hf_env, hub, home, cli):
    hub.cdn.total_rate = 512 << 10
    started = cli("get", "hf://acme/tiny", "-b", "--json")
    job = json.loads(started.stdout)["job"]
    deadline = time.monotonic() + 60
    while bytes_on_disk(part_state(home)) < 512 << 10:
        assert time.monotonic() < deadline, cli("log", job).stdout
        time.sleep(0.05)
    cancelled = cli("cancel", job)
    assert cancelled.returncode == 0, cancelled.stderr
    record = json.loads(cli("status", job, "--json").stdout)["jobs"][0]
    assert record["state"] == "cancelled", record
    assert record["files"][0]["name"] == "hf://acme/tiny" and record["files"][0]["bytes"] > 0
    kept, ranges = bytes_on_disk(part_state(home)), kept_ranges(home)
    assert kept >= 512 << 10
    hub.cdn.total_rate = None
    first_new = len(hub.cdn.requests)
    assert cli("resume", job).returncode == 0
    waited = cli("wait", job, "--timeout", "120")
    assert waited.returncode == 0, waited.stderr + cli("log", job).stdout
    assert_no_kept_byte_asked_again(hub.cdn.requests[first_new:], ranges)
    resent = sum(r.body_bytes_sent for r in hub.cdn.requests[first_new:])
    assert resent < len(WEIGHTS) - kept // 2, (resent, kept)
    assert_offline_loads(hf_env, "acme/tiny", MODEL_FILES)


def test_a_dataset_mirror_setting_is_not_taken_for_the_hub(hf_env, hub, home, cli, monkeypatch):
    monkeypatch.setenv("PREFETCH_DATASET_MIRROR", "http://127.0.0.1:9/datasets/")
    started = cli("get", "hf://acme/tiny", "--include", "*.json", "-b")
    assert started.returncode == 0, started.stderr
    assert cli("wait", "--timeout", "120").returncode == 0
    mixed = cli("get", "mnist", "hf://acme/tiny", "--mirror", "hf-mirror")
    assert mixed.returncode == 2 and "separate commands" in mixed.stderr


def test_python_api_ensure_and_wait(hf_env, hub, home):
    code = f"""
import prefetch
results = prefetch.ensure("hf://datasets/acme/table", include="*.csv", mirror={hub.url!r})
print([r.status for r in results])
print(prefetch.wait("hf://datasets/acme/table").exit_code)
"""
    env = dict(hf_env, HF_ENDPOINT="http://127.0.0.1:9")  # the mirror argument wins
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["['downloaded', 'downloaded']", "0"]
    assert_offline_loads(hf_env, "acme/table", {"data/train.csv": DATA_FILES["data/train.csv"]}, repo_type="dataset")


@pytest.mark.parametrize("field,value", [("path", "../../../escape.txt"), ("path", "/etc/x"),
                                         ("oid", "../../../../escape"), ("lfs", {"oid": "../x", "size": 1})])
def test_a_hostile_listing_writes_nothing_outside(hf_env, hub, home, cli, field, value):
    def patch(entries):
        entries[0][field] = value
        return entries

    hub.tree_patch = patch
    done = cli("get", "hf://acme/tiny")
    assert done.returncode == 3 and done.stderr.startswith("prefetch: error:") and "Traceback" not in done.stderr
    assert not (cache(home) / "models--acme--tiny" / "snapshots").exists()
    assert not list(home.rglob("escape*"))


def test_rm_a_repo_or_one_revision(hf_env, hub, home, cli):
    v2 = dict(MODEL_FILES, **{"config.json": b'{"model_type": "tiny", "hidden_size": 16}\n'})
    old = hub.repos[("model", "acme/tiny")]
    assert cli("get", "hf://acme/tiny").returncode == 0
    hub.add_repo("acme/tiny", v2, lfs={"model.safetensors"}, branches=("main", "v2"))
    assert cli("get", "hf://acme/tiny@v2").returncode == 0
    folder = cache(home) / "models--acme--tiny"
    new = hub.repos[("model", "acme/tiny")].commit
    # One revision: its snapshot and ref go, and the blob only it used; shared blobs stay.
    done = cli("rm", "hf://acme/tiny@v2")
    assert done.returncode == 0, done.stderr
    assert not (folder / "snapshots" / new).exists() and not (folder / "refs" / "v2").exists()
    assert not (folder / "blobs" / blob_name(v2["config.json"], lfs=False)).exists()
    assert (folder / "blobs" / blob_name(WEIGHTS, lfs=True)).is_file()
    assert (folder / "refs" / "main").read_text() == old.commit
    assert_offline_loads(hf_env, "acme/tiny", MODEL_FILES)
    # The whole repo, and huggingface_hub's lock folder for it.
    assert cli("rm", "hf://acme/tiny", "--dry-run").returncode == 0 and folder.is_dir()
    assert cli("rm", "hf://acme/tiny").returncode == 0
    assert not folder.exists() and not (cache(home) / ".locks" / "models--acme--tiny").exists()
    assert cli("rm", "hf://acme/x/y/z").returncode == 2


def test_rm_leaves_a_repo_being_downloaded_and_clean_removes_a_dead_partial(hf_env, hub, home, cli):
    hub.cdn.total_rate = 256 << 10
    proc = start_cli("get", "hf://acme/tiny", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while bytes_on_disk(part_state(home)) < 256 << 10:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        busy = cli("rm", "hf://acme/tiny")
        assert busy.returncode == 1 and "left alone" in busy.stdout + busy.stderr
        assert part_state(home).exists()
        assert cli("clean", "--older-than", "0").returncode == 0 and part_state(home).exists()
    finally:
        proc.kill()
        proc.wait()
    cleaned = cli("clean", "--older-than", "0")
    assert cleaned.returncode == 0, cleaned.stderr
    assert not part_state(home).exists() and not part_state(home).with_suffix("").exists()


def test_api_force_downloads_present_blobs_again(hf_env, hub, home, cli):
    assert cli("get", "hf://acme/tiny", "--include", "*.safetensors").returncode == 0
    sent = hub.cdn.bytes_sent
    assert cli("get", "hf://acme/tiny", "--include", "*.safetensors").returncode == 0
    assert hub.cdn.bytes_sent == sent
    code = ("import prefetch; print(sorted({r.status for r in prefetch.ensure("
            "'hf://acme/tiny', include='*.safetensors', force=True)}))")
    forced = subprocess.run([sys.executable, "-c", code], env=hf_env, capture_output=True, text=True, timeout=120)
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.strip() == "['downloaded']"
    assert hub.cdn.bytes_sent - sent >= len(WEIGHTS)  # (the server counts what it wrote, read or not)


def test_names_cache_root_and_token_follow_huggingface_hub(tmp_path):
    from prefetch.hf.names import hub_cache_root, hub_token, parse_hub_name

    repo = parse_hub_name("hf://datasets/acme/table@refs%2Fpr%2F1")
    assert (repo.repo_type, repo.repo_id, repo.revision, repo.folder) == ("dataset", "acme/table", "refs/pr/1",
                                                                         "datasets--acme--table")
    assert parse_hub_name("hf://acme/tiny").label == "hf://acme/tiny" and parse_hub_name("hf://gpt2").folder == "models--gpt2"
    env = {"HOME": str(tmp_path)}
    assert hub_cache_root(env) == tmp_path / ".cache" / "huggingface" / "hub"
    assert hub_cache_root({**env, "XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert hub_cache_root({**env, "HF_HOME": "~/hf"}) == tmp_path / "hf" / "hub"
    assert hub_cache_root({**env, "HF_HOME": "/a", "HUGGINGFACE_HUB_CACHE": "/b"}) == Path("/b")
    assert hub_cache_root({**env, "HUGGINGFACE_HUB_CACHE": "/b", "HF_HUB_CACHE": "/c"}) == Path("/c")
    assert hub_token(env) is None
    (tmp_path / "tok").write_text("hf_file\n")
    assert hub_token({**env, "HF_TOKEN_PATH": str(tmp_path / "tok")}) == "hf_file"
    assert hub_token({**env, "HF_TOKEN_PATH": str(tmp_path / "tok"), "HF_TOKEN": " hf_env "}) == "hf_env"
    assert hub_token({**env, "HUGGING_FACE_HUB_TOKEN": "hf_legacy"}) == "hf_legacy"


def test_huggingface_hub_after_a_killed_get_then_get_again(hf_env, hub, home):
    """Our partial does not trip huggingface_hub, and once it has the blob our partial goes."""
    hub.cdn.total_rate = 512 << 10
    proc = start_cli("get", "hf://acme/tiny", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sigkill_when(proc, lambda: bytes_on_disk(part_state(home)) >= 256 << 10, what="some weights on disk")
    hub.cdn.total_rate = None
    online = hf_python("from huggingface_hub import snapshot_download; print(snapshot_download('acme/tiny'))",
                       hf_env, offline=False)
    assert online.returncode == 0, online.stderr
    assert_offline_loads(hf_env, "acme/tiny", MODEL_FILES)
    first_new = len(hub.cdn.requests)
    done = subprocess.run([sys.executable, "-m", "prefetch", "get", "hf://acme/tiny"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert len(hub.cdn.requests) == first_new
    assert not part_state(home).exists() and not part_state(home).with_suffix("").exists()


def test_cache_dir_and_force_apply_to_hf_names(hf_env, hub, home, cli, tmp_path):
    """Issue 21, item 6: --cache-dir is the hub cache for hf:// names (as huggingface_hub's cache_dir=),
    and --force downloads a complete repo again."""
    custom = tmp_path / "my-hub"
    done = cli("get", "hf://acme/tiny", "--cache-dir", str(custom))
    assert done.returncode == 0, done.stderr
    commit = hub.repos[("model", "acme/tiny")].commit
    for name, data in MODEL_FILES.items():
        assert (custom / "models--acme--tiny" / "snapshots" / commit / name).read_bytes() == data
    assert not (cache(home) / "models--acme--tiny").exists()

    before = len(hub.file_requests())
    again = cli("get", "hf://acme/tiny", "--cache-dir", str(custom))
    assert again.returncode == 0 and len(hub.file_requests()) == before  # complete: nothing asked again
    forced = cli("get", "hf://acme/tiny", "--cache-dir", str(custom), "--force")
    assert forced.returncode == 0, forced.stderr
    assert len(hub.file_requests()) > before
    for name, data in MODEL_FILES.items():
        assert (custom / "models--acme--tiny" / "snapshots" / commit / name).read_bytes() == data


def test_an_unreachable_hub_is_no_failure_when_the_repo_is_complete_locally(hf_env, hub, home, cli):
    """Issue 21, item 6: a repo prefetch completed (and still in place) is cached while the Hub is away."""
    assert cli("get", "hf://acme/tiny").returncode == 0
    away = dict(hf_env, HF_ENDPOINT=f"http://127.0.0.1:{closed_port()}", PREFETCH_RETRIES="0", PREFETCH_TIMEOUT="3")

    done = run_cli("get", "hf://acme/tiny", env=away)
    assert done.returncode == 0, done.stderr
    assert "could not be reached" in done.stderr and "in place" in done.stderr

    # A file missing since: the Hub's absence is a failure again (exit 3), nothing claimed.
    repo = cache(home) / "models--acme--tiny"
    blob = repo / "blobs" / blob_name(MODEL_FILES["model.safetensors"], lfs=True)
    blob.unlink()
    done = run_cli("get", "hf://acme/tiny", env=away)
    assert done.returncode == 3, done.stderr


def test_wait_on_a_commit_needs_the_repo_complete_not_its_snapshot_folder(hf_env, hub, home, cli):
    commit = hub.repos[("model", "acme/tiny")].commit
    name = f"hf://acme/tiny@{commit}"
    snapshot = cache(home) / "models--acme--tiny" / "snapshots" / commit
    snapshot.mkdir(parents=True)  # a half-filled snapshot (another tool, an interrupted run)
    (snapshot / "config.json").write_bytes(MODEL_FILES["config.json"])

    assert cli("wait", name, "--timeout", "5").returncode != 0

    assert cli("get", name).returncode == 0
    waited = cli("wait", name, "--timeout", "5")
    assert waited.returncode == 0, waited.stdout + waited.stderr


def test_a_repo_of_many_files_shares_connections_across_files(hf_env, hub, home, cli):
    """A repo of 150 small files and a large one goes through the shared scheduler: every file
    in place for huggingface_hub, over far fewer TCP connections than files (kept alive)."""
    files = {f"shards/part-{i:03d}.json": (b'{"i": %d}\n' % i) * 300 for i in range(150)}
    files["model.safetensors"] = os.urandom(3 << 20)
    hub.add_repo("acme/many", files, lfs={"model.safetensors"})
    done = cli("get", "hf://acme/many", "--host-connections", "8")
    assert done.returncode == 0, done.stderr
    assert_offline_loads(hf_env, "acme/many", files)
    downloads = [r for r in hub.requests if "/resolve/" in r.path]
    assert len({r.path.split("/resolve/")[1] for r in downloads}) == len(files)
    # The budget holds at every moment (counted by the server), and connections are kept alive:
    # a connection closed and opened again under load may add to the total, never to the peak.
    assert hub.downloading_peak <= 8, f"{hub.downloading_peak} connections at once for a budget of 8"
    connections = {r.client for r in downloads}
    assert len(connections) <= len(files) // 8, f"{len(connections)} connections for {len(files)} files"
