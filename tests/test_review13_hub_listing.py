"""A Hub file listing whose next page is always a new URL (a cursor that counts up) but never
ends: the same files again on every page, or empty pages. The self-link loop was refused
(tests/test_many_hostile_hub.py); a changing link paged for ever (the list growing with the
repeated files). Now a page that lists nothing new while naming a next page is a network error:
exit 3, one line, after two pages."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from tests.test_many_hostile_hub import COMMIT, JsonApi, get_listed_by


class CountingHub(JsonApi):
    """Every tree page links to the next cursor; ``files(cursor)`` gives the page's entries."""

    def __init__(self, files) -> None:
        self.pages = 0
        self.files = files
        super().__init__()

    def answer(self, target: str) -> tuple[str, object, str]:
        if "/revision/" in target:
            return "200 OK", {"sha": COMMIT}, ""
        if "/tree/" in target:
            self.pages += 1
            parts = urlsplit(target)
            cursor = int(parse_qs(parts.query).get("cursor", ["0"])[0])
            link = f"{self.base}{parts.path}?recursive=true&expand=false&cursor={cursor + 1}"
            return "200 OK", self.files(cursor), f'Link: <{link}>; rel="next"\r\n'
        return "404 Not Found", {"error": "Not Found"}, ""


def _same_files(cursor: int) -> list:
    return [{"type": "file", "oid": "b" * 40, "size": 5, "path": f"f{i}.txt"} for i in range(3)]


def _nothing(cursor: int) -> list:
    return []


@pytest.mark.parametrize("files", [_same_files, _nothing], ids=["same-files", "empty-pages"])
def test_a_listing_whose_next_page_never_ends_is_a_network_error(files, home, cli, monkeypatch):
    hub = CountingHub(files)
    proc = get_listed_by(hub, "acme/endless", home=home, cli=cli, monkeypatch=monkeypatch)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1 and "never end" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert hub.pages <= 2, hub.pages
