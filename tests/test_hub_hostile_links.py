"""A Hub whose tree listing's ``Link: <...>; rel="next"`` points where no Hub page is.

The next page's URL comes from the Hub's answer, and was followed as given: ``file:///...``
made prefetch read a local file as the next page (the paths it listed were then asked of the
Hub in ``resolve`` URLs: a local file's contents sent to the Hub), and an https listing could
continue over plain http. The next page is held to what a redirect is: http(s) only, never
from https down to http; anything else is exit 3 in one line, before any file is fetched.
"""

from __future__ import annotations

import json

import pytest

from tests.hub_origin import HubServer, _Handler
from tests.test_hf import MODEL_FILES, cache, hf_env  # noqa: F401 - fixture


class _NextHandler(_Handler):
    """The hub's handler, with each next page's URL in a ``Link`` header replaced by ``hub.relink(url)``."""

    def send_header(self, keyword, value):
        relink = self.server.hub.relink
        if keyword == "Link" and relink is not None:
            value = f'<{relink(value[1:value.index(">")])}>; rel="next"'
        super().send_header(keyword, value)


class NextHub(HubServer):
    relink = None  # callable(next page URL) -> the URL sent instead


NextHub.api_handler = _NextHandler


@pytest.fixture
def hub():
    with NextHub() as server:
        server.add_repo("acme/tiny", MODEL_FILES, lfs={"model.safetensors"})
        server.page_size = 2  # the listing pages: the first answer carries a next link
        yield server


def test_a_next_page_on_the_local_disk_is_never_read(hf_env, hub, home, cli, tmp_path):
    local = tmp_path / "local-notes.json"  # a local file that happens to read as a tree page
    local.write_text(json.dumps([{"type": "file", "path": "private-note-0123", "size": 1, "oid": "a" * 40}]))
    hub.relink = lambda url: local.as_uri()
    done = cli("get", "hf://acme/tiny")
    assert done.returncode == 3, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("prefetch: error:") and "Traceback" not in done.stderr and local.as_uri() in last
    assert "private-note" not in hub.all_headers_text()  # nothing of the file went to the Hub
    assert hub.file_requests(method=None) == []
    assert not (cache(home) / "models--acme--tiny" / "snapshots").exists()


def test_a_next_page_on_another_http_host_is_followed(hf_env, hub, home, cli):
    hub.relink = lambda url: url.replace("127.0.0.1", "localhost")  # pages may come from another host
    done = cli("get", "hf://acme/tiny")
    assert done.returncode == 0, done.stderr
    assert any(r.headers.get("Host", "").startswith("localhost") for r in hub.requests)
