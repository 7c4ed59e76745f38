"""A ModelScope model listing cut at the truncation limit in every folder, each folder holding
two more (inside it, as a real one would), down to 21 levels (within the walk's depth limit of
64, which a deeper tree meets first): the walk was bounded in depth but not in breadth, 2 ** 21
cut listings here. Now a walk that needs more than ``MAX_CUT_LISTINGS`` cut listings
(each one stands for 3,000 entries or more) is a network error: exit 3, one line."""

from __future__ import annotations

import subprocess
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.ms_origin import use_endpoint
from tests.test_many_hostile_hub import JsonApi


class BranchingMs(JsonApi):
    def __init__(self) -> None:
        from prefetch.ms.api import TRUNCATION_LIMIT

        self.limit, self.requests, self.cut = TRUNCATION_LIMIT, 0, 0
        super().__init__()

    def answer(self, target: str) -> tuple[str, object, str]:
        self.requests += 1
        query = parse_qs(urlsplit(target).query)
        root = query.get("Root", [""])[0]
        if "/repo/files" not in target:
            return "404 Not Found", {"Code": 404, "Data": None, "Message": "nf", "Success": False}, ""
        if query.get("Recursive") == ["True"] and root.count("/") >= 20:
            return "200 OK", {"Code": 200, "Data": {"Files": []}, "Message": "", "Success": True}, ""  # (within depth)
        if query.get("Recursive") == ["True"]:
            self.cut += 1
            files = [{"Path": "f", "Type": "blob"}] * self.limit  # cut at the limit: listed again by folder
        else:
            files = [{"Name": n, "Path": f"{root}/{n}" if root else n, "Type": "tree"} for n in ("a", "b")]
        return "200 OK", {"Code": 200, "Data": {"Files": files}, "Message": "", "Success": True}, ""


def test_a_folder_walk_that_branches_without_end_is_a_network_error(home, cli, monkeypatch):
    from prefetch.ms import api

    cap = getattr(api, "MAX_CUT_LISTINGS", 256)
    ms = BranchingMs()
    use_endpoint(monkeypatch, ms.base, home / "ms")
    try:
        proc = cli("get", "ms://acme/branching", timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still walking after 60 s ({ms.requests} requests)")
    finally:
        ms.close()
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert proc.stderr.count("prefetch: error:") == 1 and "folder" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert ms.cut == cap + 1, ms.cut
