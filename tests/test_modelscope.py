"""ms:// repos into ModelScope's cache, checked by the real modelscope client (loopback hub only).

The local API (tests/ms_origin.py) is proven first by the real client downloading from
it; then everything prefetch places is read back by the real client with its endpoint
at a closed port (offline and online), which must make no request and download nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import sigkill_when, start_cli
from tests.ms_origin import MsServer, use_endpoint

WEIGHTS = hashlib.sha256(b"ms-seed").digest() * (3 << 15)  # 3 MiB: redirected to the object store
MODEL = {
    "config.json": b'{"model_type": "tiny", "hidden_size": 8}\n',
    "configuration.json": b'{"framework": "pytorch", "task": "text-generation"}\n',
    "tokenizer.json": b'{"version": "1.0"}\n' * 50,
    "model.safetensors": WEIGHTS,
    "nested/dir/README.md": b"# nested\n",
}
DATA = {"train.csv": b"x,y\n1,2\n" * 500, "sub/test.csv": b"x,y\n3,4\n"}


@pytest.fixture
def ms():
    with MsServer() as server:
        server.add_repo("acme/tiny", MODEL)
        server.add_repo("acme/table", DATA, kind="datasets")
        yield server


@pytest.fixture
def ms_env(home, ms, monkeypatch) -> dict:
    use_endpoint(monkeypatch, ms.url, home / "ms")
    return os.environ.copy()


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed once the socket is


def ms_python(code: str, env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def client_reads(env: dict, repo_id: str, files: dict[str, bytes], *, dataset: bool = False,
                 offline: bool) -> None:
    """The real client returns exactly ``files`` from the cache, its endpoint at a closed port."""
    env = {**env, "MODELSCOPE_ENDPOINT": closed_port()}
    single = "" if dataset else f"""
for name in {sorted(files)!r}:
    # revision given: without it this modelscope asks the endpoint for a release tag first,
    # even offline (15 s of retries against a closed port before it settles on master).
    out["single"][name] = model_file_download({repo_id!r}, name, revision="master", local_files_only={offline})
"""
    code = f"""
import json, os
from modelscope.hub.snapshot_download import snapshot_download
from modelscope.hub.file_download import model_file_download
out = {{"single": {{}}, "snapshot": {{}}}}
{single}
snap = snapshot_download(repo_id={repo_id!r}, repo_type={"dataset" if dataset else "model"!r},
                         local_files_only={offline})
for root, dirs, names in os.walk(snap):
    for n in names:
        p = os.path.join(root, n)
        out["snapshot"][os.path.relpath(p, snap)] = p
print(json.dumps(out))
"""
    out = ms_python(code, env)
    got = {k: Path(v).read_bytes() for k, v in out["snapshot"].items()}
    assert got == files
    assert all(Path(v).read_bytes() == files[k] for k, v in out["single"].items())


def test_the_local_api_is_what_the_real_client_downloads_from(ms_env, ms, home):
    """The real client, against tests/ms_origin.py: layout and bytes (this proves the local API)."""
    out = ms_python("""
import json
from modelscope import snapshot_download
from modelscope.hub.snapshot_download import dataset_snapshot_download
print(json.dumps([snapshot_download("acme/tiny"), dataset_snapshot_download("acme/table")]))
""", ms_env)
    assert out == [str(home / "ms" / "models" / "acme--tiny" / "snapshots" / "master"),
                   str(home / "ms" / "datasets" / "acme--table" / "snapshots" / "master")]
    assert (Path(out[0]) / "model.safetensors").read_bytes() == WEIGHTS
    assert ms.cdn.bytes_sent >= len(WEIGHTS)  # the large file came through the redirect


def test_get_places_a_model_the_client_reads_offline_and_online_without_a_request(ms_env, ms, home, cli):
    proc = cli("get", "ms://acme/tiny")
    assert proc.returncode == 0, proc.stderr
    snap = home / "ms" / "models" / "acme--tiny" / "snapshots" / "master"
    assert {str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_file()} == set(MODEL)
    client_reads(ms_env, "acme/tiny", MODEL, offline=True)
    before = ms.content_bytes()
    out = ms_python("""
import json
from modelscope import snapshot_download
print(json.dumps(snapshot_download("acme/tiny")))
""", ms_env)  # online, against the live hub: it lists, finds every file by size and sha256
    assert Path(out) == snap
    assert ms.content_bytes() == before  # not one file byte again
    again = cli("get", "ms://acme/tiny")
    assert again.returncode == 0 and ms.content_bytes() == before


def test_a_dataset_repo_and_its_paged_tree(ms_env, ms, home, cli):
    many = {**DATA, **{f"parts/{i:03d}.txt": b"%d\n" % i for i in range(205)}}  # two pages of 200
    ms.add_repo("acme/many", many, kind="datasets")
    proc = cli("get", "ms://datasets/acme/many")
    assert proc.returncode == 0, proc.stderr
    assert any("PageNumber=2" in r.path for r in ms.requests)
    client_reads(ms_env, "acme/many", many, dataset=True, offline=True)


def test_include_and_exclude(ms_env, ms, home, cli):
    proc = cli("get", "ms://acme/tiny", "--include", "*.json", "--exclude", "tokenizer.json")
    assert proc.returncode == 0, proc.stderr
    snap = home / "ms" / "models" / "acme--tiny" / "snapshots" / "master"
    assert sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_file()) == [
        "config.json", "configuration.json"]


def test_wrong_sha256_exits_4_and_places_nothing(ms_env, ms, home, cli):
    ms.add_repo("acme/liar", {"config.json": b"{}\n", "w.bin": b"x" * 5000},
                listed_sha256={"w.bin": hashlib.sha256(b"other").hexdigest()})
    proc = cli("get", "ms://acme/liar")
    assert proc.returncode == 4, proc.stderr
    assert "sha256" in proc.stderr
    snap = home / "ms" / "models" / "acme--liar" / "snapshots" / "master"
    assert not (snap / "w.bin").exists()
    assert not [p for p in snap.iterdir() if p.name.startswith("w.bin")]  # no partial left either


def test_sigkill_mid_file_then_get_again_resumes(ms_env, ms, home):
    ms.cdn.total_rate = 512 << 10  # 3 MiB take ~6 s
    state = home / "ms" / "models" / "acme--tiny" / "snapshots" / "master" / "model.safetensors.part.json"

    def kept() -> list[tuple[int, int]]:
        try:
            return [(a, b) for a, b in json.loads(state.read_text())["done"]]
        except (OSError, ValueError, KeyError):
            return []

    proc = start_cli("get", "ms://acme/tiny", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sigkill_when(proc, lambda: sum(b - a for a, b in kept()) >= 1 << 20, what="1 MiB of the weights recorded")
    ranges = kept()
    ms.cdn.total_rate = None
    first_new = len(ms.cdn.requests)
    done = subprocess.run([sys.executable, "-m", "prefetch", "get", "ms://acme/tiny"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "already on disk" in done.stderr, done.stderr
    for r in [r for r in ms.cdn.requests[first_new:] if r.method == "GET"]:
        first, _, last = (r.range or "").removeprefix("bytes=").partition("-")
        lo, hi = int(first), int(last) + 1 if last else len(WEIGHTS)
        assert all(hi <= a or lo >= b for a, b in ranges), (r.range, ranges)  # no kept byte asked again
    client_reads(ms_env, "acme/tiny", MODEL, offline=True)


def test_private_repo_token_goes_to_the_endpoint_only_and_a_background_job(ms_env, ms, home, cli, monkeypatch):
    ms.add_repo("acme/secret", {"config.json": b"{}\n", "big.bin": WEIGHTS}, private=True)
    refused = cli("get", "ms://acme/secret")
    assert refused.returncode == 3 and "MODELSCOPE_API_TOKEN" in refused.stderr, refused.stderr
    monkeypatch.setenv("MODELSCOPE_API_TOKEN", ms.token)
    started = cli("get", "ms://acme/secret", "-b", "--json")
    assert started.returncode == 0, started.stderr
    job = json.loads(started.stdout)["job"]
    waited = cli("wait", job, "--timeout", "120")
    assert waited.returncode == 0, waited.stderr + cli("log", job).stdout
    client_reads(os.environ.copy(), "acme/secret", {"config.json": b"{}\n", "big.bin": WEIGHTS}, offline=True)
    assert cli("wait", "ms://acme/secret").returncode == 0  # by name: complete
    assert cli("wait", "ms://acme/tiny").returncode != 0  # never fetched
    # The token reached the hub, never the object store the large file redirected to.
    assert any(ms.token in str(r.headers) for r in ms.requests)
    assert not any(ms.token in str(r.headers) for r in ms.cdn.requests)
    state = home / ".prefetch"
    leaked = [p for p in state.rglob("*") if p.is_file() and ms.token.encode() in p.read_bytes()]
    assert not leaked
    log = cli("log", job).stdout
    assert ms.token not in log


def test_a_mirrors_toml_entry_names_the_endpoint(ms_env, ms, home, cli, monkeypatch):
    monkeypatch.setenv("MODELSCOPE_ENDPOINT", closed_port())  # --mirror wins over the variable
    config = home / ".prefetch" / "config"
    config.mkdir(parents=True)
    (config / "mirrors.toml").write_text(f'[mirrors.lab]\ntitle = "our ModelScope"\nms = "{ms.url}"\n')
    proc = cli("get", "ms://acme/tiny", "--mirror", "lab", "--include", "config.json")
    assert proc.returncode == 0, proc.stderr
    assert (home / "ms" / "models" / "acme--tiny" / "snapshots" / "master" / "config.json").is_file()
    listed = cli("mirror", "list")
    assert listed.returncode == 0 and "lab" in listed.stdout, listed.stderr


def test_verify_rehashes_and_rm_removes_a_repo(ms_env, ms, home, cli):
    assert cli("get", "ms://acme/tiny").returncode == 0
    ok = cli("verify", "ms://acme/tiny")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    snap = home / "ms" / "models" / "acme--tiny" / "snapshots" / "master"
    (snap / "config.json").write_bytes(b'{"model_type": "TINY", "hidden_size": 8}\n')  # same size, other bytes
    bad = cli("verify", "ms://acme/tiny")
    assert bad.returncode == 4 and "config.json" in bad.stdout + bad.stderr
    gone = cli("rm", "ms://acme/tiny@master")
    assert gone.returncode == 0, gone.stderr
    assert not snap.exists() and (home / "ms" / "models" / "acme--tiny").is_dir()
    assert cli("wait", "ms://acme/tiny").returncode != 0  # its record went with it
    assert cli("rm", "ms://acme/tiny").returncode == 0
    assert not (home / "ms" / "models" / "acme--tiny").exists()


def test_names_endpoint_and_cache_follow_modelscope(tmp_path):
    from prefetch.ms.names import ms_cache_root, ms_endpoint, parse_ms_name
    from prefetch.errors import UsageError

    env = {"HOME": str(tmp_path)}
    assert ms_cache_root(env) == tmp_path / ".cache" / "modelscope"
    assert ms_endpoint(None, env=env, config=None) == "https://modelscope.cn"
    assert ms_endpoint(None, env={"MODELSCOPE_DOMAIN": "www.modelscope.cn"}, config=None) == "https://www.modelscope.cn"
    assert ms_endpoint(None, env={"MODELSCOPE_DOMAIN": "http://10.0.0.5:8080"}, config=None) == "http://10.0.0.5:8080"
    assert ms_endpoint(None, env={"MODELSCOPE_ENDPOINT": "http://a:1", "MODELSCOPE_DOMAIN": "b"},
                       config=None) == "http://a:1"
    repo = parse_ms_name("ms://datasets/acme/table@v1.0")
    assert (repo.repo_type, repo.repo_id, repo.revision) == ("dataset", "acme/table", "v1.0")
    for bad in ("ms://acme", "ms://acme/../x", "ms://a/b/c/d", "ms://acme/x@../../etc"):
        with pytest.raises(UsageError):
            parse_ms_name(bad)


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/passwd", "a/../../b", "a//b"])
def test_a_hostile_listing_writes_nothing_outside_the_snapshot(ms_env, ms, home, cli, path):
    repo = ms.add_repo("acme/hostile", {"config.json": b"{}\n", "x": b"x"})
    repo.files[path] = repo.files.pop("x")
    proc = cli("get", "ms://acme/hostile")
    assert proc.returncode == 3 and "unsafe file path" in proc.stderr, proc.stderr
    written = [p for p in (home / "ms").rglob("*") if p.is_file()]
    assert written == [], written
