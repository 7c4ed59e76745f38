"""huggingface_hub, offline, reading what ``prefetch get hf://`` placed: revisions and names."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import sigkill_when, start_cli
from tests.test_hf import MODEL_FILES, cache, hf_env, hf_python, hub  # noqa: F401 (fixtures)

SHORT = {"config.json": MODEL_FILES["config.json"], "nested/dir/README.md": MODEL_FILES["nested/dir/README.md"]}


def offline_reads(env: dict, repo_id: str, revision: str | None, *, repo_type: str = "model") -> dict:
    code = f"""
import json, os
from huggingface_hub import hf_hub_download, snapshot_download, try_to_load_from_cache
out = {{}}
kw = dict(repo_type={repo_type!r}, revision={revision!r})
out["single"] = open(hf_hub_download({repo_id!r}, "nested/dir/README.md", local_files_only=True, **kw), "rb").read().decode()
out["cached"] = try_to_load_from_cache({repo_id!r}, "config.json", **kw)
snap = snapshot_download({repo_id!r}, local_files_only=True, **kw)
out["snapshot"] = sorted(os.path.relpath(os.path.join(r, n), snap) for r, _, ns in os.walk(snap) for n in ns)
print(json.dumps(out))
"""
    done = hf_python(code, env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("revision", ["v1.0", "refs/pr/1", "dev-branch.x"])
def test_a_named_revision(hf_env, hub, home, cli, revision):
    repo = hub.add_repo("acme-org/tiny.v2", SHORT, branches=("main", revision))
    got = cli("get", f"hf://acme-org/tiny.v2@{revision}")
    assert got.returncode == 0, got.stderr
    out = offline_reads(hf_env, "acme-org/tiny.v2", revision)
    assert out["single"] == SHORT["nested/dir/README.md"].decode()
    assert out["cached"] and out["cached"].endswith("config.json")
    assert out["snapshot"] == sorted(SHORT)


def test_full_and_short_commit(hf_env, hub, home, cli):
    repo = hub.add_repo("acme/short", SHORT)
    for rev in (repo.commit, repo.commit[:7]):
        got = cli("get", f"hf://acme/short@{rev}")
        assert got.returncode == 0, (rev, got.stderr)
        out = offline_reads(hf_env, "acme/short", rev)
        assert out["snapshot"] == sorted(SHORT), rev


@pytest.mark.parametrize("kind", ["dataset", "space"])
def test_other_repo_types(hf_env, hub, home, cli, kind):
    hub.add_repo("acme/thing", SHORT, repo_type=kind)
    got = cli("get", f"hf://{kind}s/acme/thing")
    assert got.returncode == 0, got.stderr
    out = offline_reads(hf_env, "acme/thing", None, repo_type=kind)
    assert out["snapshot"] == sorted(SHORT)


def test_the_tree_listing_huggingface_hub_caches_is_written_too(hf_env, hub, home, cli):
    """huggingface_hub 2.4 keeps each commit's listing in ``trees/<commit>.json``: ``get_cached_repo_tree``
    raised ``CachedRepoTreeNotFoundError`` on a repo prefetch placed, and ``snapshot_download`` of the
    commit asked the Hub for the listing again."""
    repo = hub.repos[("model", "acme/tiny")]
    xet = "ab" * 32  # a file in Xet storage: the Hub lists its xetHash

    def with_xet(entries):
        return [{**e, "xetHash": xet} if e["path"] == "model.safetensors" else e for e in entries]

    hub.tree_patch = with_xet
    assert cli("get", "hf://acme/tiny").returncode == 0
    code = ("import json; from huggingface_hub import get_cached_repo_tree as t\n"
            "print(json.dumps({f.path: [f.size, f.blob_id, f.xet_hash] for f in t('acme/tiny')}))")
    done = hf_python(code, hf_env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {p: [len(f.data), f.oid, xet if p == "model.safetensors" else None]
                                       for p, f in repo.files.items()}
    before = len(hub.requests)
    code = f"from huggingface_hub import snapshot_download; print(snapshot_download('acme/tiny', revision={repo.commit!r}))"
    online = hf_python(code, hf_env, offline=False)
    assert online.returncode == 0, online.stderr[-2000:]
    assert hub.requests[before:] == []  # the listing and every file found on disk


def test_a_killed_get_leaves_a_snapshot_huggingface_hub_calls_incomplete(hf_env, hub, home):
    """The listing is written before the files: offline, ``snapshot_download`` of the commit (which
    needs no ref) returned the half-filled snapshot folder of a killed ``get`` as the repo."""
    repo = hub.repos[("model", "acme/tiny")]
    hub.cdn.total_rate = 256 << 10  # the 3 MiB of weights take ~12 s
    proc = start_cli("get", f"hf://acme/tiny@{repo.commit}", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    snap = cache(home) / "models--acme--tiny" / "snapshots" / repo.commit
    sigkill_when(proc, lambda: (snap / "config.json").is_symlink(), what="config.json in place")
    code = f"""
from huggingface_hub import snapshot_download
from huggingface_hub.errors import IncompleteSnapshotError, LocalEntryNotFoundError
try:
    snapshot_download("acme/tiny", revision={repo.commit!r})
    print("returned")
except (IncompleteSnapshotError, LocalEntryNotFoundError):  # (which one depends on HF_HUB_OFFLINE's path)
    print("incomplete")
"""
    done = hf_python(code, hf_env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["incomplete"]


def test_a_selection_writes_no_listing_and_reads_as_before(hf_env, hub, home, cli):
    """``--include``: no listing is written (huggingface_hub would call the snapshot incomplete when
    asked without the same patterns); snapshot_download returns the selected files offline."""
    assert cli("get", "hf://acme/tiny", "--include", "*.json").returncode == 0
    assert not (cache(home) / "models--acme--tiny" / "trees").exists()
    code = "from huggingface_hub import snapshot_download as s; print(s('acme/tiny'))"
    done = hf_python(code, hf_env)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_repo_updated_after_a_first_get(hf_env, hub, home, cli):
    """The branch moves: refs/main names the new commit, the old snapshot stays readable by its hash,
    and each commit has its own listing."""
    old = hub.add_repo("acme/moving", SHORT)
    assert cli("get", "hf://acme/moving").returncode == 0
    new_files = {**SHORT, "config.json": b'{"model_type": "tiny", "hidden_size": 16}\n'}
    new = hub.add_repo("acme/moving", new_files)
    assert new.commit != old.commit
    assert cli("get", "hf://acme/moving").returncode == 0
    folder = cache(home) / "models--acme--moving"
    assert (folder / "refs" / "main").read_text() == new.commit
    assert {p.name for p in (folder / "trees").iterdir()} == {f"{old.commit}.json", f"{new.commit}.json"}
    code = f"""
from huggingface_hub import hf_hub_download as h
print(open(h("acme/moving", "config.json"), "rb").read().decode().strip())
print(open(h("acme/moving", "config.json", revision={old.commit!r}), "rb").read().decode().strip())
"""
    done = hf_python(code, hf_env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == [new_files["config.json"].decode().strip(), SHORT["config.json"].decode().strip()]
    removed = cli("rm", f"hf://acme/moving@{old.commit}")  # one revision: its listing goes with its snapshot
    assert removed.returncode == 0, removed.stderr
    assert {p.name for p in (folder / "trees").iterdir()} == {f"{new.commit}.json"}
