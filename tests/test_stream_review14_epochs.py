"""A second epoch over hashed shards reads nothing again: no request, and no re-hash of files
prefetch placed after checking that very hash (real files, the in-process origin)."""

from __future__ import annotations

import hashlib
import os

import prefetch

MiB = 1 << 20


def read_bytes_so_far() -> int:
    """Bytes this process has read with read() and friends (/proc/self/io rchar)."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


def test_a_second_epoch_neither_downloads_nor_hashes_the_shards_again(origin, home, tmp_path):
    blobs = {f"shard-{i}.bin": os.urandom(24 * MiB) for i in range(2)}
    for name, data in blobs.items():
        origin.put(name, data)
    urls = [origin.url_for(n) + "#sha256=" + hashlib.sha256(d).hexdigest() for n, d in blobs.items()]
    out = tmp_path / "out"
    first = list(prefetch.as_completed(urls, output_dir=str(out), progress=False))
    assert [p.name for p in first] == list(blobs)
    asked = {n: len(origin.data_requests(n)) for n in blobs}
    before = read_bytes_so_far()
    again = list(prefetch.as_completed(urls, output_dir=str(out), progress=False))
    read = read_bytes_so_far() - before
    assert again == first and {n: len(origin.data_requests(n)) for n in blobs} == asked
    assert read < 4 * MiB, read  # hashing them again would read all 48 MiB

    # A shard changed in place since (its size kept, so only the record's mtime tells) is hashed,
    # found wrong and fetched again: the record proves only the file it was written for.
    path = out / "shard-1.bin"
    with open(path, "r+b") as f:
        f.write(b"\0" * 16)
    third = list(prefetch.as_completed(urls, output_dir=str(out), progress=False))
    assert third == first and path.read_bytes() == blobs["shard-1.bin"]
    assert len(origin.data_requests("shard-1.bin")) > asked["shard-1.bin"]


def test_a_file_others_may_write_is_hashed_again_whatever_its_attribute_says(origin, home, tmp_path):
    """The record may be an attribute on the file itself, and whoever may write the file may
    write its attributes: in a shared, group-writable cache another member could change a
    shard and write a record naming its new mtime and the expected digest. Such a file's record
    proves nothing: it is hashed, found wrong and fetched again."""
    data = os.urandom(2 * MiB)
    origin.put("shard.bin", data)
    url = origin.url_for("shard.bin") + "#sha256=" + hashlib.sha256(data).hexdigest()
    out = tmp_path / "out"
    (first,) = prefetch.as_completed([url], output_dir=str(out), progress=False)
    try:
        record = os.getxattr(first, "user.prefetch.placed")
    except OSError:
        record = None  # (no user attributes here: the record is in prefetch's own state dir)
    asked = len(origin.data_requests("shard.bin"))
    os.chmod(first, 0o664)  # a shared cache's umask 002
    with open(first, "r+b") as f:  # another member's change, its size kept
        f.write(b"\1" * 64)
    if record is not None:  # ... and a record that names the changed file
        forged = record.replace(b'"mtime_ns": ', b'"mtime_ns": ' + str(os.stat(first).st_mtime_ns).encode() + b", \"was\": ")
        assert forged != record
        os.setxattr(first, "user.prefetch.placed", forged)
    (again,) = prefetch.as_completed([url], output_dir=str(out), progress=False)
    assert again.read_bytes() == data
    assert len(origin.data_requests("shard.bin")) > asked
