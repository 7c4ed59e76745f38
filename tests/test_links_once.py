"""Links that can be used once: what prefetch spends on a link before its body.

A portal's single-use token link, or an S3/OSS presigned GET with one use (or a few seconds)
left, answers its first request and refuses the next (403). ``tests/once_server.py`` serves such
links (each at most N times, then 403) and logs every request.

Before, ``--content-disposition`` asked each link for its name with a request of its own
(``GET`` with ``Range: bytes=0-0``), then the download asked again: with N=1 the download met
a 403 (exit 3) and nothing was saved. Now, in a run of a few files, the name's request is the
download's own first request (``Range: bytes=0-`` up to the first window) and its answer is
kept for the download: a file below a piece costs exactly one request, a large one no request
beyond its ranges. A plain get spent one request on a small file already; that is pinned here
too.
"""

from __future__ import annotations

import hashlib
import os
import random

import pytest

from tests.conftest import run_cli
from tests.once_server import LimitedLink

SMALL = random.Random(1601).randbytes(300_000)  # below a piece (PREFETCH_FIRST_REQUEST, 1 MiB)
LARGE = random.Random(1602).randbytes(6 << 20)


@pytest.mark.parametrize("hashed", [False, True])
def test_a_single_use_link_with_content_disposition_gives_its_file(home, tmp_path, hashed):
    out = tmp_path / "out"
    extra = ["--sha256", hashlib.sha256(SMALL).hexdigest()] if hashed else []
    with LimitedLink({"report": SMALL}, uses=1) as link:
        got = run_cli("get", link.url("report"), "--content-disposition", "-o", f"{out}/", *extra, cwd=tmp_path)
        asked = link.requests("report")
    assert got.returncode == 0, got.stderr
    assert os.listdir(out) == ["served-report"], os.listdir(out)
    assert (out / "served-report").read_bytes() == SMALL
    assert asked == [("GET", "bytes=0-1048575", 206)], asked  # one request, its body kept


def test_a_single_use_link_plain_get_costs_one_request(home, tmp_path):
    out = tmp_path / "out"
    with LimitedLink({"report.bin": SMALL}, uses=1) as link:
        got = run_cli("get", link.url("report.bin"), "-o", f"{out}/", cwd=tmp_path)
        asked = link.requests("report.bin")
    assert got.returncode == 0, got.stderr
    assert (out / "report.bin").read_bytes() == SMALL
    assert len(asked) == 1 and asked[0][2] == 206, asked


@pytest.mark.parametrize("named", [False, True])
def test_a_large_file_needs_no_request_beyond_its_ranges(home, tmp_path, named):
    """No probe of its own (no ``bytes=0-0``, no HEAD): the first request is the first range
    (how the rest is cut into ranges is the engine's timing: a slow connection's range may be
    split, a broken one asked again, so the later requests are not counted)."""
    out = tmp_path / "out"
    extra = ["--content-disposition"] if named else []
    with LimitedLink({"big": LARGE}, uses=0) as link:
        got = run_cli("get", link.url("big"), "-o", f"{out}/", *extra, cwd=tmp_path)
        asked = link.requests("big")
    assert got.returncode == 0, got.stderr
    name = "served-big" if named else "big"
    assert (out / name).read_bytes() == LARGE
    assert all(method == "GET" and status == 206 for method, _, status in asked), asked
    assert asked[0][1] == "bytes=0-1048575", (asked, got.stderr)
    assert "bytes=0-0" not in [r for _, r, _ in asked], (asked, got.stderr)


def test_a_file_found_in_place_costs_its_names_request_only(home, tmp_path):
    """Run again, the file is in place (cached): its name's request, kept for a download that does
    not happen, is given back (closed, its connection slot freed) and the run ends, exit 0, the
    file untouched: one request a run (before: two for the first run, one after)."""
    out = tmp_path / "out"
    with LimitedLink({"report": SMALL}, uses=0) as link:
        first = run_cli("get", link.url("report"), "--content-disposition", "-o", f"{out}/", cwd=tmp_path)
        again = run_cli("get", link.url("report"), "--content-disposition", "-o", f"{out}/", cwd=tmp_path,
                        timeout=60)
        asked = link.requests("report")
    assert first.returncode == 0 and again.returncode == 0, again.stderr
    assert "cached" in again.stderr, again.stderr
    assert len(asked) == 2, asked  # (the name cannot be known without asking: one request a run)
    assert (out / "served-report").read_bytes() == SMALL


def test_a_longer_list_still_asks_each_name_apart(home, tmp_path):
    """More than a few links: each name is asked apart (``bytes=0-0``), as before; every file lands."""
    files = {f"f{i}": SMALL[: 1000 + i] for i in range(6)}
    listing = tmp_path / "list.txt"
    with LimitedLink(files, uses=0) as link:
        listing.write_text("".join(link.url(name) + "\n" for name in files))
        got = run_cli("get", "-i", str(listing), "--content-disposition", "-P", str(tmp_path / "out"), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert sorted(os.listdir(tmp_path / "out")) == sorted(f"served-{name}" for name in files)
    for name, data in files.items():
        assert (tmp_path / "out" / f"served-{name}").read_bytes() == data
