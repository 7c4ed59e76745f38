"""Hub API answers that lie, against ``get hf://`` and ``get ms://``: one line and exit 3, nothing placed.

* JSON nested deeper than Python's parser goes (``[[[[...]]]]``, a few hundred KB): the
  parser's RecursionError came out as "internal error (a bug in prefetch)", exit 1.
* An API answer far larger than any Hub answer: it was read whole into memory (an endless
  one would fill it); now at most ``jsonapi.MAX_BODY`` bytes are read, then exit 3.
* API answers compressed (``Content-Encoding: gzip``) although prefetch asks for ``identity``, as
  a proxy or CDN may send them: requests (so huggingface_hub) reads them; prefetch said "did not
  answer JSON", exit 3. They are expanded now, to at most ``MAX_BODY`` (a gzip bomb is exit 3).
* A listed file size JSON reads as a float ``int()`` cannot take (``1e400``, ``Infinity``):
  OverflowError, "internal error", exit 1; a fraction (``1.5``) was cut to an integer.
* A file tree that lists one path twice with two different blobs: both blobs were fetched
  and the snapshot entry linked to whichever finished last, exit 0; a git tree never lists
  a path twice, so the listing is refused before any byte is fetched.
"""

from __future__ import annotations

import gzip
import os
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from prefetch.net import jsonapi
from tests.helpers import serve_in_thread, stop_server
from tests.hub_origin import HubServer, _Handler
from tests.ms_origin import use_endpoint
from tests.test_hf import MODEL_FILES, assert_offline_loads, cache, hf_env  # noqa: F401 - fixture

COMMIT = "a" * 40


class _Answer(BaseHTTPRequestHandler):
    """Every GET gets ``server.body`` (200, application/json); ``server.sent`` counts the bytes that went out."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:
        body = self.server.body
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        for key, value in self.server.headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        view = memoryview(body)
        try:
            for i in range(0, len(body), 1 << 20):
                self.wfile.write(view[i:i + (1 << 20)])
                with self.server.lock:
                    self.server.sent += len(view[i:i + (1 << 20)])
        except OSError:  # the client stopped reading
            self.close_connection = True


@pytest.fixture
def answer():
    server, url = serve_in_thread(_Answer, body=b"", sent=0, lock=threading.Lock(), headers={})
    server.url = url
    yield server
    stop_server(server)


def _hub_env(monkeypatch, home, url) -> None:
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    use_endpoint(monkeypatch, url, home / "ms")


def _one_line_exit_3(done) -> str:
    assert done.returncode == 3, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("prefetch: error:") and "Traceback" not in done.stderr and "internal error" not in last
    return last


DEEP = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize("name", ["hf://acme/tiny", f"hf://acme/tiny@{COMMIT}", "ms://acme/tiny",
                                  "ms://datasets/acme/table"])
def test_json_nested_past_the_parser_is_not_json(answer, home, cli, monkeypatch, name):
    _hub_env(monkeypatch, home, answer.url)
    answer.body = DEEP  # @COMMIT: the revision call is skipped, the tree listing gets it
    line = _one_line_exit_3(cli("get", name))
    assert "did not answer JSON" in line
    assert not (home / "hf").exists() and not (home / "ms").exists()


def test_an_api_answer_larger_than_any_hubs_is_not_read_whole(answer, home, cli, monkeypatch):
    _hub_env(monkeypatch, home, answer.url)
    # Past the limit by more than both sockets' buffers can hold (the reader's autotunes up to
    # tcp_rmem's 32 MiB here), so a client that hangs up at the limit leaves bytes unsent.
    pad = jsonapi.MAX_BODY + (64 << 20)
    answer.body = b'{"sha": "%s", "pad": "%s"}' % (COMMIT.encode(), b"x" * pad)  # valid JSON, a valid commit
    line = _one_line_exit_3(cli("get", "hf://acme/tiny"))
    assert f"more than {jsonapi.MAX_BODY >> 20} MiB" in line
    assert answer.sent < len(answer.body)  # the client hung up; it never took the whole body
    assert not (home / "hf").exists()


@pytest.fixture
def hub():
    with HubServer() as server:
        server.add_repo("acme/tiny", MODEL_FILES, lfs={"model.safetensors"})
        yield server


def test_a_tree_listing_a_path_twice_is_refused_before_any_download(hf_env, hub, home, cli):
    def twice(entries):
        tokenizer = next(e for e in entries if e["path"] == "tokenizer.json")
        return [*entries, {**tokenizer, "path": "config.json"}]  # config.json, now also with the tokenizer's blob

    hub.tree_patch = twice
    line = _one_line_exit_3(cli("get", "hf://acme/tiny"))
    assert "'config.json' twice" in line
    assert hub.file_requests(method=None) == []  # nothing fetched
    assert not (cache(home) / "models--acme--tiny" / "snapshots").exists()
    assert not (cache(home) / "models--acme--tiny" / "refs").exists()


@pytest.mark.parametrize("size", [b"1e400", b"Infinity", b"1.5"])
@pytest.mark.parametrize("hub_kind", ["hf", "ms"])
def test_a_listed_size_that_is_no_integer_is_a_malformed_entry(answer, home, cli, monkeypatch, size, hub_kind):
    _hub_env(monkeypatch, home, answer.url)
    if hub_kind == "hf":  # @COMMIT: straight to the tree listing
        answer.body = b'[{"type": "file", "path": "a.bin", "size": %s, "oid": "%s"}]' % (size, COMMIT.encode())
        name = f"hf://acme/tiny@{COMMIT}"
    else:
        answer.body = b'{"Code": 200, "Success": true, "Data": {"Files": [{"Path": "a.bin", "Type": "blob", ' \
                      b'"Size": %s, "Sha256": ""}]}}' % size
        name = "ms://acme/tiny"
    line = _one_line_exit_3(cli("get", name))
    assert "malformed file entry" in line
    assert not (home / "hf").exists() and not (home / "ms").exists()


class _GzipHandler(_Handler):
    """The hub's handler, its API answers gzip-compressed whatever the request asked for."""

    def _json(self, status, value, body, *, code=None, headers=None):
        import json

        data = gzip.compress(json.dumps(value).encode())
        self.record.status = status
        self.send_response(status)
        for k, v in {**(headers or {}), "Content-Type": "application/json", "Content-Encoding": "gzip"}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)


class GzipHub(HubServer):
    pass


GzipHub.api_handler = _GzipHandler


def test_gzip_encoded_api_answers_are_read_as_requests_reads_them(home, cli, monkeypatch):
    with GzipHub() as hub:
        hub.add_repo("acme/tiny", MODEL_FILES, lfs={"model.safetensors"})
        hub.page_size = 2  # the Link header of a compressed page is read too
        _hub_env(monkeypatch, home, hub.url)
        done = cli("get", "hf://acme/tiny")
        assert done.returncode == 0, done.stderr
    assert_offline_loads(dict(os.environ), "acme/tiny", MODEL_FILES)


def test_a_gzip_bomb_api_answer_is_exit_3(answer, home, cli, monkeypatch):
    _hub_env(monkeypatch, home, answer.url)
    answer.headers = {"Content-Encoding": "gzip"}
    answer.body = gzip.compress(b'{"sha": "%s", "pad": "%s"}' % (COMMIT.encode(), b" " * (jsonapi.MAX_BODY + (8 << 20))))
    assert len(answer.body) < 1 << 20
    line = _one_line_exit_3(cli("get", "hf://acme/tiny"))
    assert f"more than {jsonapi.MAX_BODY >> 20} MiB" in line
    assert not (home / "hf").exists()
