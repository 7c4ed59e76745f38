"""One object given twice under two signings in one ``get`` (an ``-i`` list, or the command
line) is fetched once and placed once (real nginx on 127.0.0.1).

A portal hands out presigned links (a new ``X-Amz-Signature`` or ``token`` each time); a list
built over two sessions names the same object twice, once per signing. Both lines go to the
same file, and the planner compared URLs exactly: "... and ... would both be saved as ...;
give one of them out=NAME", exit 2, nothing fetched. The two are one link
(``net/urls.link_key``, as the completion and resume records already take them): now the file
is fetched once, from the first signing, with the second as another source of the same object
(an expired first signing, 403, falls back to it).
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer
from tests.test_links_identity import V1, www


@pytest.fixture
def nginx(tmp_path):
    # a signing that has expired is refused, as a presigned GET past its lifetime is
    with NginxServer(www(tmp_path), location='if ($arg_token = "expired") { return 403; }') as server:
        yield server


def _listed(tmp_path, *lines: str):
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{line}\n" for line in lines))
    return run_cli("get", "-i", str(listing), "-P", str(tmp_path / "data"), cwd=tmp_path)


@pytest.mark.parametrize("first", ["fresh", "expired"])
def test_two_signings_of_one_object_are_fetched_once(nginx, home, tmp_path, first):
    url = nginx.url_for("v1/x.csv")
    got = _listed(tmp_path, f"{url}?token={first}", f"{url}?token=fresh2")
    assert got.returncode == 0, got.stderr
    assert os.listdir(tmp_path / "data") == ["x.csv"]
    assert (tmp_path / "data" / "x.csv").read_bytes() == V1
    bodies = [row for row in nginx.served() if row[1] in (200, 206)]
    assert sum(row[0] for row in bodies) == len(V1), nginx.served()  # fetched once


def test_two_links_that_name_two_files_are_still_refused(nginx, home, tmp_path):
    url = nginx.url_for("v1/x.csv")
    got = _listed(tmp_path, f"{url}?v=1", f"{url}?v=2")
    assert got.returncode == 2, got.stderr
    assert "would both be saved as" in got.stderr, got.stderr
    assert not (tmp_path / "data" / "x.csv").exists()
