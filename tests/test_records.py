"""Completion records (issue 19): prefetch's proof that it placed a file complete.

A file with no expected hash is trusted at its final path only with its record (same path,
inode, size and mtime). The record is kept on the file itself as an extended attribute
where the filesystem takes them (no record file, so no inode, per file of a run of thousands),
else, or when the file already carries another path's record (a hard link shared with
another cache), as a file in the state dir's ``placed/``.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from prefetch.cache import placement
from prefetch.model.plans import FilePlan
from prefetch.model.specs import FileSpec

DATA = random.Random(19).randbytes(20_000)
XATTR = "user.prefetch.placed"


def _xattrs_work(where: Path) -> bool:
    probe = where / ".xattr-probe"
    probe.write_bytes(b"")
    try:
        os.setxattr(probe, "user.probe", b"1")
        return True
    except OSError:
        return False
    finally:
        probe.unlink()


def _plan(final: Path) -> FilePlan:
    return FilePlan(dataset="url", spec=FileSpec(name=final.name, url="http://h/x", target=str(final)),
                    final=final, also=(), extract_into=())


class _Transfer:
    digest = None


def test_records_of_a_list_are_kept_on_the_files_and_trusted_next_run(cli, home, origin, tmp_path):
    if not _xattrs_work(tmp_path):
        pytest.skip("this filesystem takes no user extended attributes")
    names = [f"f{i}.bin" for i in range(5)]
    for name in names:
        origin.put(name, DATA)
    listing = tmp_path / "list.txt"
    listing.write_text("".join(origin.url_for(n) + "\n" for n in names))
    out = tmp_path / "out"
    proc = cli("get", "-i", str(listing), "-P", str(out), "-q", timeout=60)
    assert proc.returncode == 0, proc.stderr
    placed = home / ".prefetch" / "state" / "placed"
    assert not placed.exists() or not list(placed.iterdir()), "a record file (and its inode) per file"
    for name in names:
        # no digest: the compact form (tests/test_records_compact.py), which holds no URL either
        raw = os.getxattr(out / name, XATTR)
        assert origin.url_for(name).encode() not in raw  # readable by whoever reads the file: no URLs in it
        record = placement.read_completion(placed, out / name, os.stat(out / name))
        assert record["path"] == str(out / name) and record["ino"] == os.stat(out / name).st_ino
    served = len(origin.data_requests(names[0]))
    proc = cli("get", "-i", str(listing), "-P", str(out), "--json", timeout=60)
    assert {r["status"] for r in json.loads(proc.stdout)} == {"cached"}
    assert len(origin.data_requests(names[0])) == served
    # A file changed in place since is not the one prefetch completed, record or not.
    (out / names[0]).write_bytes(DATA[:100])
    proc = cli("get", "-i", str(listing), "-P", str(out), "--json", timeout=60)
    assert sorted(r["status"] for r in json.loads(proc.stdout)) == ["cached"] * 4 + ["downloaded"]
    assert (out / names[0]).read_bytes() == DATA


def test_a_file_carrying_another_paths_record_gets_its_own_in_the_records_dir(tmp_path):
    """A hard link shared with another cache keeps that cache's record; this path's goes to placed/."""
    if not _xattrs_work(tmp_path):
        pytest.skip("this filesystem takes no user extended attributes")
    final, records = tmp_path / "d.bin", tmp_path / "placed"
    final.write_bytes(DATA)
    theirs = json.dumps({"path": "/another/cache/d.bin"}).encode()
    os.setxattr(final, XATTR, theirs)
    placement.write_completion(records, _plan(final), _Transfer())
    assert os.getxattr(final, XATTR) == theirs
    assert placement.completion_path(records, final).is_file()
    assert placement.completion_matches(records, final, os.lstat(final))


def test_a_link_planted_at_a_record_file_is_not_written_through(tmp_path):
    """Where the record goes to placed/, its name is created with O_EXCL | O_NOFOLLOW: a link
    there is refused (the file stays unrecorded: downloaded again next time, never wrongly trusted)."""
    final, records = tmp_path / "d.bin", tmp_path / "placed"
    final.write_bytes(DATA)
    if _xattrs_work(tmp_path):  # the record goes to placed/ only when the file already has one
        os.setxattr(final, XATTR, json.dumps({"path": "/another/cache/d.bin"}).encode())
    records.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"mine")
    os.symlink(victim, placement.completion_path(records, final))
    placement.write_completion(records, _plan(final), _Transfer())
    assert victim.read_bytes() == b"mine"
    assert not placement.completion_matches(records, final, os.lstat(final))


def test_an_attribute_left_from_an_earlier_placement_does_not_hide_the_new_record(tmp_path):
    """The same inode placed again (adopted in place after a change of mtime): the old
    attribute stays (it is only ever created, never replaced), the new record goes to placed/,
    and that one is trusted."""
    if not _xattrs_work(tmp_path):
        pytest.skip("this filesystem takes no user extended attributes")
    final, records = tmp_path / "d.bin", tmp_path / "placed"
    final.write_bytes(DATA)
    placement.write_completion(records, _plan(final), _Transfer())
    os.utime(final, ns=(1, 1))  # the attribute's mtime is no longer the file's
    assert not placement.completion_matches(records, final, os.lstat(final))
    placement.write_completion(records, _plan(final), _Transfer())
    assert placement.completion_path(records, final).is_file()
    assert placement.completion_matches(records, final, os.lstat(final))
