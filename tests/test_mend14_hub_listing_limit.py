"""A Hub file listing whose pages keep naming new files (a new cursor and new names on every
page) was unbounded: the loop checks (tests/test_many_hostile_hub.py,
tests/test_review13_hub_listing.py) see something new each time. One repo's listing now holds at
most ``PREFETCH_HUB_MAX_FILES`` entries (default 1,000,000; the variable overrides it): past it,
exit 3, one line that names the variable. A ModelScope dataset's pages are held to the same limit."""

from __future__ import annotations

import subprocess

import pytest

from tests.ms_origin import use_endpoint
from tests.test_many_hostile_hub import JsonApi
from tests.test_review13_hub_listing import CountingHub


def _new_names(per_page: int):
    def files(cursor: int) -> list:
        return [{"type": "file", "oid": "b" * 40, "size": 5, "path": f"p{cursor}/f{i}.txt"} for i in range(per_page)]
    return files


def test_a_listing_of_ever_new_names_stops_at_the_limit_given(home, cli, monkeypatch):
    from tests.test_many_hostile_hub import get_listed_by

    monkeypatch.setenv("PREFETCH_HUB_MAX_FILES", "50")
    hub = CountingHub(_new_names(10))
    proc = get_listed_by(hub, "acme/endless", home=home, cli=cli, monkeypatch=monkeypatch)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "more than 50 files" in proc.stderr and "PREFETCH_HUB_MAX_FILES" in proc.stderr, proc.stderr
    assert hub.pages == 6, hub.pages  # (the page that passes 50 is the last asked for)
    assert not (home / "hf" / "hub" / "models--acme--endless" / "snapshots").exists()


def test_the_default_limit_bounds_it_too(home, cli, monkeypatch):
    from tests.test_many_hostile_hub import get_listed_by

    monkeypatch.delenv("PREFETCH_HUB_MAX_FILES", raising=False)
    hub = CountingHub(_new_names(1000))
    proc = get_listed_by(hub, "acme/endless", home=home, cli=cli, monkeypatch=monkeypatch)
    assert proc.returncode == 3, proc.stderr
    assert "more than 1,000,000 files" in proc.stderr, proc.stderr
    assert hub.pages == 1001, hub.pages


def test_the_limit_reads_its_variable():
    from prefetch.hf.api import max_listed_files

    assert max_listed_files({}) == 1_000_000
    assert max_listed_files({"PREFETCH_HUB_MAX_FILES": "20"}) == 20
    assert max_listed_files({"PREFETCH_HUB_MAX_FILES": "many"}) == 1_000_000  # (not a number: the default)


class NewNamesMs(JsonApi):
    """A ModelScope dataset listing whose every page is full (200: "more to come") of new names."""

    def __init__(self) -> None:
        self.pages = 0
        super().__init__()

    def answer(self, target: str) -> tuple[str, object, str]:
        if "/repo/tree" in target:
            self.pages += 1
            files = [{"Name": f"f{i}.txt", "Path": f"p{self.pages}/f{i}.txt", "Type": "blob", "Size": 5, "Sha256": "",
                      "Revision": "0" * 40} for i in range(200)]
            return "200 OK", {"Code": 200, "Data": {"Files": files}, "Message": "", "Success": True}, ""
        return "404 Not Found", {"Code": 404, "Data": None, "Message": "nf", "Success": False}, ""


def test_a_modelscope_dataset_listing_of_ever_new_names_stops_at_the_limit(home, cli, monkeypatch):
    monkeypatch.setenv("PREFETCH_HUB_MAX_FILES", "1000")
    ms = NewNamesMs()
    use_endpoint(monkeypatch, ms.base, home / "ms")
    try:
        proc = cli("get", "ms://datasets/acme/endless", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still paging after 30 s ({ms.pages} pages)")
    finally:
        ms.close()
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1 and "PREFETCH_HUB_MAX_FILES" in proc.stderr, proc.stderr
    assert ms.pages == 6, ms.pages
