"""A ModelScope file listed without a sha256 that changed at its path is fetched again.

Before, a file prefetch had placed counted as cached on its completion record alone: a user who
ran `get ms://...` again after the repo was updated kept the old bytes beside new ones, and the
repo was called complete. Now such a file is cached only while it has the size the listing gives
(as the modelscope client judges its cache) and was placed at the revision the listing gives for
it (an entry's "Revision"), so a same-size change is seen too.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import run_cli
from tests.ms_origin import MsServer, use_endpoint
from tests.test_modelscope import closed_port, ms_python

WEIGHTS = b"w" * 5000  # listed with its sha256: judged by it, as before
OLD = {"config.json": b'{"v": 1}\n', "vocab.txt": b"a\nb\nc\n", "w.bin": WEIGHTS}
NO_SHA = {"config.json": "", "vocab.txt": ""}


@pytest.fixture
def hub(home, monkeypatch):
    with MsServer() as server:
        use_endpoint(monkeypatch, server.url, home / "ms")
        yield server


def fetched(hub: MsServer, since: int) -> list[str]:
    """The files whose bytes were asked for since request ``since``."""
    with hub.lock:
        asked = [urlsplit(r.path) for r in hub.requests[since:] if r.method == "GET"]
    return sorted(parse_qs(u.query)["FilePath"][0] for u in asked if u.path.endswith("/repo"))


def client_reads(files: dict[str, bytes]) -> None:
    """The real client, offline, returns exactly ``files``."""
    code = """
import json, os
from modelscope import snapshot_download
snap = snapshot_download("acme/upd", local_files_only=True)
print(json.dumps({os.path.relpath(os.path.join(r, n), snap): os.path.join(r, n)
                  for r, _, names in os.walk(snap) for n in names}))
"""
    out = ms_python(code, {**os.environ, "MODELSCOPE_ENDPOINT": closed_port()})
    assert {k: Path(v).read_bytes() for k, v in out.items()} == files


def test_a_file_without_sha256_of_another_size_is_fetched_again(hub, home):
    hub.add_repo("acme/upd", OLD, listed_sha256=NO_SHA)
    assert (first := run_cli("get", "ms://acme/upd")).returncode == 0, first.stderr
    new = {**OLD, "config.json": b'{"v": 2, "layers": 12}\n'}  # the same revision listed: the size tells
    hub.add_repo("acme/upd", new, listed_sha256=NO_SHA)
    since = len(hub.requests)
    again = run_cli("get", "ms://acme/upd")
    assert again.returncode == 0, again.stderr
    assert fetched(hub, since) == ["config.json"]  # the changed file only
    assert "it changed there" in again.stderr, again.stderr
    client_reads(new)
    since = len(hub.requests)
    assert run_cli("get", "ms://acme/upd").returncode == 0
    assert fetched(hub, since) == []  # unchanged since: nothing fetched


def test_a_file_without_sha256_listed_at_another_revision_is_fetched_again(hub, home):
    hub.add_repo("acme/upd", OLD, listed_sha256=NO_SHA, listed_revision={"config.json": "a" * 40})
    assert (first := run_cli("get", "ms://acme/upd")).returncode == 0, first.stderr
    new = {**OLD, "config.json": b'{"v": 2}\n'}  # the same size: only the entry's revision tells
    assert len(new["config.json"]) == len(OLD["config.json"])
    hub.add_repo("acme/upd", new, listed_sha256=NO_SHA, listed_revision={"config.json": "b" * 40})
    since = len(hub.requests)
    again = run_cli("get", "ms://acme/upd")
    assert again.returncode == 0, again.stderr
    assert fetched(hub, since) == ["config.json"]
    client_reads(new)
    since = len(hub.requests)
    assert run_cli("get", "ms://acme/upd").returncode == 0
    assert fetched(hub, since) == []
