"""A file placed from a link with an API key in its query (``?key=``, ``?api_key=``) by the
version before the eighteenth sitting is still "cached" after the upgrade, with no request
(real nginx on 127.0.0.1; the earlier version run for real, from ``git archive``).

The eighteenth sitting took credentials (``key=``, ``api_key=``, ``password=``...) out of the link's
key (``net/urls.link_key``); a completion record written by the version before names the link by
the key with them in. The new version read that as "another link" and downloaded the file again:
for a 5 GB model fetched through ``?key=...``, the first run after the upgrade fetched it all
again. Now the record's key is also compared with the key the earlier version gave the same
link (computed for the comparison only, never written). A record of another link still does
not match, and a file others may write is still not trusted (downloaded again, by design).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer
from tests.test_links_identity import V1, V2, www

EARLIER = "60503cab958e0387e6ca23fdf155beb8e759c978"  # main as the eighteenth sitting started
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def earlier(tmp_path_factory) -> Path:
    """The package as it was before the eighteenth sitting, for a real run of that version."""
    tree = tmp_path_factory.mktemp("earlier")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", EARLIER, "prefetch"], capture_output=True,
                             check=True, timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=120)
    return tree


@pytest.fixture
def nginx(tmp_path):
    with NginxServer(www(tmp_path)) as server:
        yield server


def _get_with(code: Path | None, url: str, out: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return run_cli("get", url, "-o", str(out), env=env, cwd=cwd)


def _bodies(nginx) -> int:
    return sum(row[0] for row in nginx.served() if row[1] in (200, 206))


@pytest.mark.parametrize("param", ["key", "api_key", "password"])
def test_a_file_the_earlier_version_placed_from_a_keyed_link_is_cached_after_the_upgrade(
        nginx, home, tmp_path, earlier, param):
    url = f"{nginx.url_for('v1/x.csv')}?alt=media&{param}=SECRET1"
    out = tmp_path / "data" / "x.csv"
    placed = _get_with(earlier, url, out, tmp_path)
    assert placed.returncode == 0, placed.stderr
    assert out.read_bytes() == V1
    served = len(nginx.served())
    inode = out.stat().st_ino

    again = _get_with(None, url, out, tmp_path)
    assert again.returncode == 0, again.stderr
    assert "cached" in again.stderr, again.stderr
    assert len(nginx.served()) == served, nginx.served()  # not one request, not one byte
    assert out.stat().st_ino == inode and out.read_bytes() == V1


def test_a_record_of_another_keyed_link_still_does_not_match(nginx, home, tmp_path, earlier):
    out = tmp_path / "data" / "x.csv"
    placed = _get_with(earlier, f"{nginx.url_for('v1/x.csv')}?key=SECRET1", out, tmp_path)
    assert placed.returncode == 0 and out.read_bytes() == V1, placed.stderr
    other = _get_with(None, f"{nginx.url_for('v2/x.csv')}?key=SECRET1", out, tmp_path)  # the same key, v2's file
    assert other.returncode == 0, other.stderr
    assert "cached" not in other.stderr, other.stderr
    assert out.read_bytes() == V2


def test_a_file_others_may_write_is_still_downloaded_again(nginx, home, tmp_path, earlier):
    url = f"{nginx.url_for('v1/x.csv')}?key=SECRET1"
    out = tmp_path / "data" / "x.csv"
    placed = _get_with(earlier, url, out, tmp_path)
    assert placed.returncode == 0, placed.stderr
    before = _bodies(nginx)
    out.chmod(0o664)  # a team cache after chmod -R g+w: its attribute could be anyone's
    again = _get_with(None, url, out, tmp_path)
    assert again.returncode == 0, again.stderr
    assert _bodies(nginx) - before == len(V1), nginx.served()
    assert out.read_bytes() == V1

