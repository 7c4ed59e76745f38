"""The real modelscope client, offline, reading what ``prefetch get ms://`` placed: tags, dotted
names, unicode paths."""

from __future__ import annotations

import os

import pytest

from tests.test_caches_hostile_ms import ms, ms_env  # noqa: F401 (fixtures)
from tests.test_modelscope import closed_port, ms_python

FILES = {"config.json": b'{"a": 1}\n', "\u6570\u636e/\u8bf4\u660e.md": "\u4e2d\u6587\n".encode(),
         "weights/model.bin": os.urandom(300_000)}


@pytest.mark.parametrize("kind", ["models", "datasets"])
def test_a_tag_a_dotted_name_and_unicode_paths(ms_env, ms, home, cli, kind):
    ms.add_repo("acme-org/Tiny-0.5B.v2", FILES, kind=kind, revisions=("master", "v1.0.0"))
    prefix = "datasets/" if kind == "datasets" else ""
    got = cli("get", f"ms://{prefix}acme-org/Tiny-0.5B.v2@v1.0.0")
    assert got.returncode == 0, got.stderr
    repo_type = kind[:-1]
    single = "dataset_file_download(" if kind == "datasets" else "model_file_download("
    code = f"""
import json, os
from modelscope.hub.snapshot_download import snapshot_download
from modelscope.hub.file_download import model_file_download, dataset_file_download
out = {{}}
snap = snapshot_download(repo_id="acme-org/Tiny-0.5B.v2", repo_type={repo_type!r}, revision="v1.0.0",
                         local_files_only=True)
out["snapshot"] = sorted(os.path.relpath(os.path.join(r, n), snap) for r, _, ns in os.walk(snap) for n in ns)
out["single"] = open({single}"acme-org/Tiny-0.5B.v2", "\u6570\u636e/\u8bf4\u660e.md", revision="v1.0.0",
                     local_files_only=True), encoding="utf-8").read()
print(json.dumps(out))
"""
    out = ms_python(code, {**ms_env, "MODELSCOPE_ENDPOINT": closed_port()})
    assert out["snapshot"] == sorted(FILES)
    assert out["single"] == "\u4e2d\u6587\n"
