"""ms:// placement against what the real modelscope client reads, in caches and listings that bite.

* A repo with a file ``P`` and a file ``P.part`` (or ``P.part.json``): prefetch's in-flight
  names for ``P``. The client may already have placed ``P.part``; fetching ``P`` overwrote or
  removed it as a stale partial. Refused now, before anything is touched.
* A pre-1.38 repo folder that is a link to a folder (the user moved a model to a bigger disk):
  the client reads through it; prefetch placed beside it, where the client never looks.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.ms_origin import MsServer, use_endpoint
from tests.test_modelscope import client_reads, ms_python

PARTS = {"w.bin": b"w" * 300_000, "w.bin.part": b"the repo's own file, named like a partial\n",
         "w.bin.part.json": b'{"not": "a resume state"}\n'}


@pytest.fixture
def ms():
    with MsServer() as server:
        yield server


@pytest.fixture
def ms_env(home, ms, monkeypatch) -> dict:
    use_endpoint(monkeypatch, ms.url, home / "ms")
    return os.environ.copy()


def snapshot(home: Path, name: str) -> Path:
    return home / "ms" / "models" / name / "snapshots" / "master"


def test_a_file_the_client_placed_under_a_partial_name_is_never_overwritten(ms_env, ms, home, cli):
    ms.add_repo("acme/parts", PARTS)
    ms_python("""
import json
from modelscope.hub.file_download import model_file_download
print(json.dumps(model_file_download("acme/parts", "w.bin.part", revision="master")))
""", ms_env)  # the real client places the repo's w.bin.part
    snap = snapshot(home, "acme--parts")
    assert (snap / "w.bin.part").read_bytes() == PARTS["w.bin.part"]
    proc = cli("get", "ms://acme/parts", "--include", "w.bin")
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "--exclude w.bin" in proc.stderr, proc.stderr
    assert (snap / "w.bin.part").read_bytes() == PARTS["w.bin.part"]  # the client's file is untouched
    assert not (snap / "w.bin").exists()
    # The whole repo the same way (before: w.bin's partial and its discard deleted the two placed
    # files, and w.bin failed its sha256), and nothing of it is touched either.
    whole = cli("get", "ms://acme/parts")
    assert whole.returncode == 2 and "w.bin.part" in whole.stderr, whole.stderr
    assert sorted(p.name for p in snap.iterdir()) == ["w.bin.part"]
    # What the message says works: the rest is placed, and the client reads it offline.
    rest = cli("get", "ms://acme/parts", "--exclude", "w.bin")
    assert rest.returncode == 0, rest.stderr
    kept = {k: v for k, v in PARTS.items() if k != "w.bin"}
    client_reads(ms_env, "acme/parts", kept, offline=True)


def test_a_legacy_folder_that_is_the_users_link_is_where_files_go(ms_env, ms, home, cli, tmp_path):
    files = {"config.json": b"{}\n", "w.bin": b"w" * 3000}
    ms.add_repo("acme/tiny.v2", files)
    elsewhere = tmp_path / "bigdisk" / "tiny"
    elsewhere.mkdir(parents=True)
    (elsewhere / "old.txt").write_bytes(b"from an earlier download\n")
    (home / "ms" / "models" / "acme").mkdir(parents=True)
    (home / "ms" / "models" / "acme" / "tiny___v2").symlink_to(elsewhere)  # the client's pre-1.38 name
    proc = cli("get", "ms://acme/tiny.v2")
    assert proc.returncode == 0, proc.stderr
    assert (elsewhere / "w.bin").read_bytes() == files["w.bin"]
    assert not (home / "ms" / "models" / "acme--tiny.v2").exists()
    client_reads(ms_env, "acme/tiny.v2", {**files, "old.txt": b"from an earlier download\n"}, offline=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant another user's link")
def test_another_users_legacy_link_is_refused_not_placed_beside(ms_env, ms, home, cli, tmp_path):
    ms.add_repo("acme/tiny.v2", {"config.json": b"{}\n"})
    elsewhere = tmp_path / "planted"
    elsewhere.mkdir()
    (elsewhere / "x").write_bytes(b"x")
    owner = home / "ms" / "models" / "acme"
    owner.mkdir(parents=True)
    link = owner / "tiny___v2"
    link.symlink_to(elsewhere)
    os.lchown(link, 65534, 65534)
    proc = cli("get", "ms://acme/tiny.v2")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert str(link) in proc.stderr, proc.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["x"]  # nothing written through it
    assert not (home / "ms" / "models" / "acme--tiny.v2").exists()  # nor beside it, unread by the client
