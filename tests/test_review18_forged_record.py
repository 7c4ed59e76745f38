"""A group member cannot forge the completion record of a file in a group-writable shared
cache (a real second uid, a real ``prefetch get`` with the team's umask 002).

Without a hash, what makes a file in place ``cached`` is prefetch's completion record of that
very file (size, inode, mtime). It was kept as an extended attribute on the file itself, and in
a team folder (setgid, umask 002) the placed file is group-writable: a member of the group may
write its bytes and, as whoever may write a file may set its ``user.*`` attributes, write a new
record naming the changed file's new size and mtime (the path's hash in it is no secret): files
land 0644, but a team that ran ``chmod -R g+w`` on its cache (or a ``.part`` resumed so) left them
writable by the group. The
owner's next ``get`` took the planted bytes as its own complete download: ``cached``. Now a record
on a file others may write is not trusted; such a file's record is kept in the owner's own state
dir (``placed/``), where the owner's next run finds it (still ``cached``, no request), and a
changed file no longer matches it.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import tempfile
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.test_review17_resigned_resume import DATA as BIG, _interrupted_run, slow_bucket
from tests.test_shared_cache import OTHER, as_other_user

DATA = random.Random(1801).randbytes(50_000)
PLANTED = b"a group member's bytes, not the download\n" * 100


@pytest.fixture
def nginx(tmp_path):
    with slow_bucket(tmp_path) as server:
        yield server


@pytest.fixture
def team_dir():
    """A team's shared folder: setgid, group-writable, the group the second user is in."""
    path = Path(tempfile.mkdtemp(prefix="prefetch-team-", dir="/tmp"))
    os.chown(path, 0, OTHER)
    os.chmod(path, 0o2775)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _get(cli, url: str, out: Path):
    old = os.umask(0o002)  # (the team's umask: files land group-writable; inherited by the CLI)
    try:
        return cli("get", url, "-o", str(out), timeout=60)
    finally:
        os.umask(old)


def _forge(out: Path) -> None:
    """As the group member: write other bytes into the file and a record naming them."""
    def forge():
        with open(out, "r+b") as fh:
            fh.truncate(0)
            fh.write(PLANTED)
        st = os.stat(out)
        try:
            raw = os.getxattr(out, "user.prefetch.placed")
        except OSError:
            return  # (no record on the file: nothing to forge there)
        layout = struct.Struct("<BQQQqd6s6s" if raw[0] == 2 else "<BQQQqd12s")
        fields = list(layout.unpack(raw))
        fields[1], fields[4] = st.st_size, st.st_mtime_ns
        os.setxattr(out, "user.prefetch.placed", layout.pack(*fields))
    as_other_user(forge)


def test_a_group_member_cannot_make_a_changed_file_pass_as_complete(cli, origin, team_dir):
    origin.put("d.bin", DATA)
    out = team_dir / "d.bin"
    first = _get(cli, origin.url_for("d.bin"), out)
    assert first.returncode == 0 and out.read_bytes() == DATA, first.stderr
    os.chmod(out, 0o664)  # the team made its cache group-writable (chmod -R g+w)
    assert os.stat(out).st_gid == OTHER

    _forge(out)
    assert out.read_bytes() == PLANTED
    again = _get(cli, origin.url_for("d.bin"), out)
    assert again.returncode == 0, again.stderr
    assert out.read_bytes() == DATA, f"the planted bytes were taken as the download: {again.stderr}"
    assert "cached" not in again.stdout + again.stderr, again.stderr


def test_a_file_placed_group_writable_keeps_its_record_where_the_owner_finds_it(nginx, home, team_dir):
    """A ``.part`` others may write (resumed in a group-writable cache) is placed so: its record
    goes to the owner's state dir, and the next run is still ``cached`` with no request."""
    out = team_dir / "big.bin"
    url = nginx.url_for("bucket/big.bin")
    _interrupted_run(url, out)
    os.chmod(team_dir / "big.bin.part", 0o664)
    done = _get(run_cli, url, out)
    assert done.returncode == 0 and out.read_bytes() == BIG, done.stderr
    assert os.stat(out).st_mode & 0o020
    asked = len(nginx.served())
    again = _get(run_cli, url, out)
    assert again.returncode == 0, again.stderr
    assert "cached" in again.stdout + again.stderr, again.stderr
    assert len(nginx.served()) == asked  # no request: its record is in the owner's state dir


def test_a_file_of_the_owners_own_mode_is_still_cached_with_no_request(cli, origin, team_dir):
    origin.put("d.bin", DATA)
    out = team_dir / "d.bin"
    first = _get(cli, origin.url_for("d.bin"), out)
    assert first.returncode == 0, first.stderr
    asked = len(origin.data_requests("d.bin"))
    again = _get(cli, origin.url_for("d.bin"), out)
    assert again.returncode == 0, again.stderr
    assert "cached" in again.stdout + again.stderr, again.stderr
    assert len(origin.data_requests("d.bin")) == asked
