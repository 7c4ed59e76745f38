"""Compact completion records (issue 19): a small file costs one inode and no extra block.

A file placed without a digest (no checksum asked) carries its completion record as a
53-byte binary attribute (``<BQQQqd12s``: version 1, size, dev, ino, mtime_ns, placed, the
first 12 bytes of blake2b of the absolute path; a plain URL's file, version 2, ``<BQQQqd6s6s``:
a 6-byte blake2b of the path and the link's key), which ext4 keeps in a 256-byte inode (up to
56 bytes of value with this name); the JSON record of earlier versions took a 4 KiB block of
its own. Records with a digest stay JSON. Old JSON attributes stay trusted; any value that
cannot be read is no record (the file is checked or fetched again), never an error.

Where the test's filesystem refuses user extended attributes, the records go to the state
dir's ``placed/`` as before: the tests assert on what the code chose there, and check the
attribute decoder on the values themselves.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
import time
from pathlib import Path

import pytest

from prefetch.cache import completion, placement
from prefetch.model.plans import FilePlan
from prefetch.model.specs import FileSpec
from prefetch.net.urls import link_key
from tests.test_records import _plan, _Transfer, _xattrs_work

DATA = random.Random(1919).randbytes(20_000)
XATTR = "user.prefetch.placed"
LAYOUT = struct.Struct("<BQQQqd12s")  # as documented in prefetch/cache/placement.py
LINKED = struct.Struct("<BQQQqd6s6s")  # the same, naming the link (version 2)


def _value_fits_in_inode(where: Path, size: int) -> bool:
    """Does a ``size``-byte value of this attribute take no block of its own here (ext4: <= 56)?"""
    plain, tagged = where / ".plain-probe", where / ".tagged-probe"
    try:
        plain.write_bytes(DATA)
        tagged.write_bytes(DATA)
        os.setxattr(tagged, XATTR, b"\1" * size)
        return os.stat(tagged).st_blocks == os.stat(plain).st_blocks
    finally:
        plain.unlink()
        tagged.unlink()


def _compact(final: Path, **change) -> bytes:
    """The compact value naming ``final`` as it is now, with ``change``d fields (the test's own packing)."""
    st = os.stat(final)
    f = {"version": 1, "size": st.st_size, "dev": st.st_dev, "ino": st.st_ino, "mtime_ns": st.st_mtime_ns,
         "placed": time.time(), "path": str(final.absolute())}
    f.update(change)
    path_hash = hashlib.blake2b(os.fsencode(f["path"]), digest_size=12).digest()
    return LAYOUT.pack(f["version"], f["size"], f["dev"], f["ino"], f["mtime_ns"], f["placed"], path_hash)


def _old_json(final: Path) -> bytes:
    """The attribute as earlier versions wrote it: JSON of the record without its URLs."""
    st = os.stat(final)
    return json.dumps({"path": str(final.absolute()), "size": st.st_size, "dev": st.st_dev, "ino": st.st_ino,
                       "mtime_ns": st.st_mtime_ns, "digest": None, "algorithm": None,
                       "placed": time.time()}).encode()


def _get_list(cli, origin, tmp_path, names, *args):
    listing = tmp_path / "list.txt"
    listing.write_text("".join(origin.url_for(n) + "\n" for n in names))
    return cli("get", "-i", str(listing), "-P", str(tmp_path / "out"), *args, timeout=60)


def test_a_file_placed_without_a_digest_gets_the_compact_record_and_is_trusted(cli, home, origin, tmp_path):
    names = [f"c{i}.bin" for i in range(4)]
    for name in names:
        origin.put(name, DATA)
    proc = _get_list(cli, origin, tmp_path, names, "-q")
    assert proc.returncode == 0, proc.stderr
    out, placed = tmp_path / "out", home / ".prefetch" / "state" / "placed"
    if _xattrs_work(out):
        in_inode = _value_fits_in_inode(out, LAYOUT.size)
        for name in names:
            raw = os.getxattr(out / name, XATTR)
            # (a plain URL's file: version 2, which also names its link: tests/test_links_identity.py)
            assert len(raw) <= 56 and raw[0] == 2, raw
            _version, size, dev, ino, mtime_ns, when, path_hash, link = LINKED.unpack(raw)
            st = os.stat(out / name)
            assert (size, dev, ino, mtime_ns) == (len(DATA), st.st_dev, st.st_ino, st.st_mtime_ns)
            assert path_hash == hashlib.blake2b(os.fsencode(str(out / name)), digest_size=6).digest()
            assert link.hex() == link_key(origin.url_for(name))
            assert abs(when - time.time()) < 3600
            if in_inode:  # (ext4, 256-byte inodes) the record takes no block: the file is its data alone
                plain = out / ".same-size"
                plain.write_bytes(DATA)
                assert st.st_blocks == os.stat(plain).st_blocks
                plain.unlink()
        assert not placed.exists() or not list(placed.iterdir())
    else:  # no user xattrs here: a JSON record per file in placed/, as before
        for name in names:
            record = json.loads(placement.completion_path(placed, out / name).read_bytes())
            assert record["path"] == str(out / name)
    served = len(origin.data_requests(names[0]))
    proc = _get_list(cli, origin, tmp_path, names, "--json")
    assert [r["status"] for r in json.loads(proc.stdout)] == ["cached"] * len(names)
    assert len(origin.data_requests(names[0])) == served


def test_an_old_json_attribute_is_still_trusted(cli, home, origin, tmp_path):
    """A cache placed by an earlier version keeps its files: no request for them."""
    names = ["o0.bin", "o1.bin"]
    for name in names:
        origin.put(name, DATA)
    assert _get_list(cli, origin, tmp_path, names, "-q").returncode == 0
    out, placed = tmp_path / "out", home / ".prefetch" / "state" / "placed"
    if _xattrs_work(out):
        for name in names:
            os.removexattr(out / name, XATTR)
            os.setxattr(out / name, XATTR, _old_json(out / name))
    else:  # the records are JSON files in placed/, as earlier versions wrote them
        assert all(placement.completion_path(placed, out / n).is_file() for n in names)
    served = sum(len(origin.data_requests(n)) for n in names)
    proc = _get_list(cli, origin, tmp_path, names, "--json")
    assert [r["status"] for r in json.loads(proc.stdout)] == ["cached", "cached"]
    assert sum(len(origin.data_requests(n)) for n in names) == served
    for name in names:
        record = placement.read_completion(placed, out / name, os.stat(out / name))
        assert record is not None and record["path"] == str(out / name)


@pytest.mark.parametrize("field", ["path", "size", "dev", "ino", "mtime_ns"])
def test_a_compact_record_naming_another_file_is_not_trusted(tmp_path, field):
    final, records = tmp_path / "d.bin", tmp_path / "placed"
    final.write_bytes(DATA)
    st = os.stat(final)
    other = {"path": str(tmp_path / "e.bin"), "size": st.st_size + 1, "dev": st.st_dev + 1,
             "ino": st.st_ino + 1, "mtime_ns": st.st_mtime_ns + 1}[field]
    good, bad = _compact(final), _compact(final, **{field: other})
    path = str(final.absolute())
    # The decoder: the right record decodes to the dict readers use; a wrong field does not name the file.
    record = completion._from_attribute(good, path)
    assert record is not None and completion._names(record, final, st)
    assert (record["digest"], record["algorithm"]) == (None, None)
    record = completion._from_attribute(bad, path)
    assert record is None or not completion._names(record, final, st)
    if _xattrs_work(tmp_path):  # and on the file itself
        os.setxattr(final, XATTR, good)
        assert placement.completion_matches(records, final, os.lstat(final))
        os.setxattr(final, XATTR, bad)
        assert not placement.completion_matches(records, final, os.lstat(final))
        assert placement.read_completion(records, final, os.lstat(final)) is None


def _malformed(final: Path) -> list[bytes]:
    good = _compact(final)
    noise = random.Random(7)
    return [
        b"",
        good[:-1],  # cut short
        good[:1],
        good + b"\0",  # too long
        b"\2" + good[1:],  # another version
        b"\0" + good[1:],
        b"\1" + noise.randbytes(LAYOUT.size - 1),  # random bytes of the right size and version
        noise.randbytes(LAYOUT.size),
        noise.randbytes(200),
        b"{",
        b"{not json",
        b"{\xff\xfe\x00",  # not UTF-8
        b'{"path": 1}',
        b"[]",
        b'{"a": ' + b"[" * 3000,  # nested past the JSON decoder's depth (RecursionError)
    ]


def test_malformed_attributes_count_as_no_record_and_never_raise(tmp_path):
    final, records = tmp_path / "d.bin", tmp_path / "placed"
    final.write_bytes(DATA)
    path = str(final.absolute())
    values = _malformed(final)
    for value in values:
        assert completion._from_attribute(value, path) is None, value[:20]
    if not _xattrs_work(tmp_path):
        return
    for value in values:
        os.setxattr(final, XATTR, value)
        assert placement.read_completion(records, final) is None, value[:20]
        assert not placement.completion_matches(records, final, os.lstat(final)), value[:20]
    # Placed again with that value still there: its record goes to placed/, and is trusted.
    placement.write_completion(records, _plan(final), _Transfer())
    assert os.getxattr(final, XATTR) == values[-1]
    assert placement.completion_matches(records, final, os.lstat(final))


def test_a_file_placed_with_sha256_keeps_its_digest_in_json(cli, home, origin, tmp_path):
    origin.put("h.bin", DATA)
    digest = hashlib.sha256(DATA).hexdigest()
    out, placed = tmp_path / "out", home / ".prefetch" / "state" / "placed"
    proc = cli("get", origin.url_for("h.bin"), "--sha256", digest, "-P", str(out), "-q", timeout=60)
    assert proc.returncode == 0, proc.stderr
    final = out / "h.bin"
    if _xattrs_work(out):
        record = json.loads(os.getxattr(final, XATTR))
        assert "urls" not in record
    else:
        record = json.loads(placement.completion_path(placed, final).read_bytes())
    assert (record["algorithm"], record["digest"], record["path"]) == ("sha256", digest, str(final))
    assert placement.read_completion(placed, final, os.stat(final))["digest"] == digest


def test_a_record_in_the_records_dir_is_json_with_the_urls_and_no_password(tmp_path):
    """The attribute never holds a URL (whoever reads the file reads it); the private
    records_dir file does, redacted. It is used here because the file already carries another
    path's attribute (or the filesystem takes none)."""
    final, records = tmp_path / "d.bin", tmp_path / "placed"
    final.write_bytes(DATA)
    if _xattrs_work(tmp_path):
        os.setxattr(final, XATTR, _compact(final, path="/another/cache/d.bin"))
    plan = FilePlan(dataset="url", spec=FileSpec(name="d.bin", url="http://alice:s3cret@h/x?token=abc",
                                                 target=str(final)), final=final, also=(), extract_into=())
    placement.write_completion(records, plan, _Transfer())
    raw = placement.completion_path(records, final).read_bytes()
    record = json.loads(raw)
    assert record["urls"] == ["http://h/x?(signed)"] and b"s3cret" not in raw and b"abc" not in raw
    assert (record["path"], record["digest"], record["ino"]) == (str(final), None, os.stat(final).st_ino)
    assert placement.completion_matches(records, final, os.lstat(final))
