"""A ModelScope listing with two entries for one path is refused, as an hf:// listing is.

Before, `ms.api.list_files` kept the last entry of a path silently: a broken or hostile endpoint
chose by its order which size and sha256 the file was checked against, and so which bytes
landed. Now the whole listing is refused in one line, exit 3, before a byte is fetched, in the
words an hf:// listing with a path twice gets (`hf.cache_layout.listed_twice`).
"""

from __future__ import annotations

import hashlib

import pytest

from tests.conftest import run_cli
from tests.ms_origin import MsServer, use_endpoint

REAL = b"the bytes the hub serves\n" * 40
OTHER = b"bytes the first entry names\n"


@pytest.fixture
def hub(home, monkeypatch):
    with MsServer() as server:
        use_endpoint(monkeypatch, server.url, home / "ms")
        yield server


def entry(path: str, data: bytes) -> dict:
    return {"Name": path.rsplit("/", 1)[-1], "Path": path, "Type": "blob", "Size": len(data),
            "Sha256": hashlib.sha256(data).hexdigest(), "Revision": "1" * 40}


@pytest.mark.parametrize("kind, name", [("models", "ms://acme/twice"), ("datasets", "ms://datasets/acme/twice")])
def test_a_path_listed_twice_is_refused_in_one_line(hub, home, kind, name):
    # The entry the hub serves comes last: kept silently before, whatever the first said.
    hub.add_repo("acme/twice", {"config.json": b"{}\n", "w.bin": REAL}, kind=kind,
                 extra_entries=[entry("w.bin", OTHER)])
    done = run_cli("get", name)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [f"prefetch: error: {name}: the listing has 'w.bin' twice; a repo holds one file of a name: "
                     "refusing it"], done.stderr
    assert not hub.file_requests()  # refused before a byte was fetched
    snap = home / "ms" / kind / "acme--twice" / "snapshots" / "master"
    assert not snap.exists() or not any(snap.iterdir())


def test_the_same_line_as_an_hf_listing_with_a_path_twice():
    """The words are hf://'s own (one helper), so the two hubs say it alike."""
    from prefetch.errors import NetworkError
    from prefetch.hf.cache_layout import check_tree

    with pytest.raises(NetworkError) as hf_error:
        check_tree(["w.bin", "w.bin"], label="hf://acme/twice")
    assert str(hf_error.value) == "hf://acme/twice: the listing has 'w.bin' twice; a repo holds one file of a name: " \
                                  "refusing it"
    assert int(hf_error.value.exit_code) == 3
