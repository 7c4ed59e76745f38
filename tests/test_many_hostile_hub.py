"""Hostile hub endpoints against `get hf://` and `get ms://` (#19's review of many files): a file listing
whose next page is always itself (hf), or that ignores PageNumber (ms). Before, prefetch paged
for ever (its list growing); now a page seen again is a network error (exit 3, one line)."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest

from tests.keepalive import Listener
from tests.ms_origin import use_endpoint

COMMIT = "a" * 40


class JsonApi(Listener):
    """A hub endpoint on a kept-alive connection: ``answer(target)`` gives each request's
    (status line, JSON body, extra header lines), sent with its Content-Length."""

    def __init__(self) -> None:
        self.listen()
        self.base = f"http://127.0.0.1:{self.port}"

    def answer(self, target: str) -> tuple[str, object, str]:
        raise NotImplementedError

    def _serve(self, conn: socket.socket, number: int) -> None:
        with conn:
            for head in self.heads(conn):
                status, body, extra = self.answer(head.split(b"\r\n")[0].split()[1].decode())
                data = json.dumps(body).encode()
                conn.sendall(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}"
                             f"\r\n{extra}\r\n".encode() + data)


class LoopingHub(JsonApi):
    def __init__(self) -> None:
        self.pages = 0
        super().__init__()

    def answer(self, target: str) -> tuple[str, object, str]:
        if "/revision/" in target:
            return "200 OK", {"sha": COMMIT}, ""
        if "/tree/" in target:
            self.pages += 1
            body = [{"type": "file", "oid": "b" * 40, "size": 5, "path": f"f{self.pages}.txt"}]
            return "200 OK", body, f'Link: <{self.base}{target}>; rel="next"\r\n'  # the same page, again
        return "404 Not Found", {"error": "Not Found"}, ""


def get_listed_by(hub, repo: str, *, home, cli, monkeypatch):
    """``prefetch get hf://REPO`` against ``hub`` (a JsonApi Hub whose listing misbehaves, with a
    ``pages`` count), no token; fails the test if it is still paging after 30 s; closes ``hub``."""
    monkeypatch.setenv("HF_ENDPOINT", hub.base)
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    try:
        return cli("get", f"hf://{repo}", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still paging after 30 s ({hub.pages} pages)")
    finally:
        hub.close()


def test_a_listing_that_pages_in_a_loop_is_a_network_error(home, tmp_path, cli, monkeypatch):
    hub = LoopingHub()
    proc = get_listed_by(hub, "acme/loop", home=home, cli=cli, monkeypatch=monkeypatch)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1 and "loop" in proc.stderr, proc.stderr
    assert hub.pages == 1, "its next page is the page itself: not asked again"


class PageIgnoringMs(JsonApi):
    """A ModelScope endpoint whose dataset listing ignores PageNumber: every page is the first."""

    def __init__(self) -> None:
        self.pages = 0
        super().__init__()

    def answer(self, target: str) -> tuple[str, object, str]:
        if "/repo/tree" in target:
            self.pages += 1
            files = [{"Name": f"f{i}.txt", "Path": f"f{i}.txt", "Type": "blob", "Size": 5, "Sha256": "",
                      "Revision": "0" * 40} for i in range(200)]  # a full page (200): "more to come"
            return "200 OK", {"Code": 200, "Data": {"Files": files}, "Message": "", "Success": True}, ""
        return "404 Not Found", {"Code": 404, "Data": None, "Message": "nf", "Success": False}, ""


def test_a_modelscope_listing_that_ignores_page_numbers_is_a_network_error(home, cli, monkeypatch):
    """Before: 31,787 pages in 30 s and no end."""
    ms = PageIgnoringMs()
    use_endpoint(monkeypatch, ms.base, home / "ms")
    try:
        proc = cli("get", "ms://datasets/acme/loop", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still paging after 30 s ({ms.pages} pages)")
    finally:
        ms.close()
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1 and "PageNumber" in proc.stderr, proc.stderr
    assert ms.pages == 2


class RootIgnoringMs(JsonApi):
    """A ModelScope model listing cut at the truncation limit whose folder listing ignores
    Root: every folder holds a folder ``d`` (the same, or one level deeper each time)."""

    def __init__(self, deeper: bool) -> None:
        from prefetch.ms.api import TRUNCATION_LIMIT

        self.limit, self.deeper, self.requests = TRUNCATION_LIMIT, deeper, 0
        super().__init__()

    def answer(self, target: str) -> tuple[str, object, str]:
        from urllib.parse import parse_qs, urlsplit

        self.requests += 1
        query = parse_qs(urlsplit(target).query)
        root = query.get("Root", [""])[0]
        if "/repo/files" not in target:
            return "404 Not Found", {"Code": 404, "Data": None, "Message": "nf", "Success": False}, ""
        if query.get("Recursive") == ["True"]:
            files = [{"Name": f"f{i}", "Path": f"f{i}", "Type": "blob", "Size": 1, "Sha256": ""}
                     for i in range(self.limit)]  # cut at the limit: listed again by folder
        else:
            sub = f"{root}/d" if (self.deeper and root) else "d"
            files = [{"Name": "d", "Path": sub, "Type": "tree", "Size": 0, "Sha256": ""}]
        return "200 OK", {"Code": 200, "Data": {"Files": files}, "Message": "", "Success": True}, ""


@pytest.mark.parametrize("deeper", [False, True])
def test_a_modelscope_folder_listing_that_never_ends_is_a_network_error(home, cli, monkeypatch, deeper):
    ms = RootIgnoringMs(deeper)
    use_endpoint(monkeypatch, ms.base, home / "ms")
    try:
        proc = cli("get", "ms://acme/loop", timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still listing after 60 s ({ms.requests} requests)")
    finally:
        ms.close()
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "folder" in proc.stderr, proc.stderr
