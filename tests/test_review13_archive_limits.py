"""Zips built to exhaust memory or time before a limit is checked (archive/limits.py): a central
directory of a million and more entries (each pointing at one stored byte: 53 bytes of archive an
entry), and a member whose header understates what it inflates to (read as far as its header says).
The directory is one line with exit 6, nothing extracted, in bounded memory: zipfile held ~500 bytes an entry
before the member count was checked (600 MB and 6 s to refuse a 64 MB archive)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
import tracemalloc
import zlib

import pytest

from prefetch.archive.extract import extract_archive
from prefetch.errors import UnsafeArchiveError


def many_entries_zip(count: int) -> bytes:
    """A zip whose central directory lists ``count`` entries (names 0000000, 0000001...), all of
    one stored 1-byte local member; the end record claims at most 65535 (zipfile reads by size)."""
    crc = zlib.crc32(b"x")
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, 1, 1, 1, 0) + b"a" + b"x"
    entry = struct.Struct("<4s6H3L5H2L")
    directory = b"".join(entry.pack(b"PK\x01\x02", 20, 20, 0, 0, 0, 0, crc, 1, 1, 7, 0, 0, 0, 0, 0, 0) + b"%07x" % i
                         for i in range(count))
    claimed = min(count, 0xFFFF)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, claimed, claimed, len(directory), len(local), 0)
    return local + directory + end


def test_a_directory_of_more_entries_than_the_limit_is_refused_before_it_is_held(tmp_path):
    archive = tmp_path / "many.zip"
    archive.write_bytes(many_entries_zip(300_000))  # (15.9 MB)
    tracemalloc.start()
    try:
        with pytest.raises(UnsafeArchiveError, match="more than 1000 members"):
            extract_archive(archive, tmp_path / "out", max_members=1000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak  # (a MiB read at a time; zipfile's objects for all of it: ~150 MB)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["many.zip"]


def test_a_directory_within_the_limit_still_extracts(tmp_path):
    import zipfile

    archive = tmp_path / "some.zip"
    with zipfile.ZipFile(archive, "w") as zf:  # (names of 60: a directory the count is read from)
        for i in range(3000):
            zf.writestr(f"{i:060d}", b"x")
    extracted = extract_archive(archive, tmp_path / "out", max_members=3000)
    assert len(extracted.entries) == 3000
    assert (tmp_path / "out" / f"{2999:060d}").read_bytes() == b"x"
    with pytest.raises(UnsafeArchiveError, match="more than 2999 members"):
        extract_archive(archive, tmp_path / "out2", max_members=2999)


def test_get_extract_of_a_million_entry_zip_is_one_line_in_bounded_memory(nginx_origin, home, tmp_path):
    (nginx_origin.root / "many.zip").write_bytes(many_entries_zip(1_200_000))  # (64 MB; the default limit 1M)
    err = tmp_path / "stderr"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "prefetch", "get", nginx_origin.url_for("many.zip"), "-o",
                                 str(tmp_path / "dl" / "many.zip"), "--extract"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=stderr)
        peak = 0  # (KiB: the process's own high-water mark; its rusage would count the forking pytest's)
        while proc.poll() is None:
            peak = max(peak, _high_water(proc.pid))
            time.sleep(0.05)
    text = err.read_text()
    assert proc.returncode == 6, text
    errors = [line for line in text.splitlines() if line.startswith("prefetch: error:")]
    assert len(errors) == 1 and "more than 1000000 members" in errors[0], text
    assert "Traceback" not in text
    assert 0 < peak < 300 << 10, peak  # (zipfile's objects for 1.2M entries: ~600 MB, held for seconds)
    dl = tmp_path / "dl"  # (made by this run: removed at its end when nothing is left in it)
    assert not dl.exists()  # (nothing of the archive, no .part, no temp)


def _high_water(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next((int(line.split()[1]) for line in status if line.startswith("VmHWM:")), 0)
    except (OSError, ValueError):  # (exited meanwhile)
        return 0


def _understated_member(real: bytes, claimed: int) -> bytes:
    """One deflated member whose headers say it inflates to ``claimed`` bytes (CRC of those)."""
    packed = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = packed.compress(real) + packed.flush()
    crc = zlib.crc32(real[:claimed])
    name = b"big.bin"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(body), claimed, len(name), 0) + name
    entry = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(body), claimed, len(name), 0, 0,
                        0, 0, 0, 0) + name
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(entry), len(local) + len(body), 0)
    return local + body + entry + end


def test_a_member_inflating_far_past_its_header_stops_at_its_header_in_bounded_memory(tmp_path):
    archive = tmp_path / "liar.zip"
    archive.write_bytes(_understated_member(b"\0" * (200 << 20), 1000))  # (200 MiB of zeros in 200 KB)
    tracemalloc.start()
    try:
        extracted = extract_archive(archive, tmp_path / "out")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert extracted.entries == ["big.bin"]
    assert (tmp_path / "out" / "big.bin").stat().st_size == 1000  # (what its header and CRC say; never 200 MiB)
    assert peak < 32 << 20, peak


def _repeated_dirs_tar_gz(count: int) -> bytes:
    """A tar.gz of ``count`` headers of one folder ``d/`` (a few bytes each, compressed)."""
    import gzip
    import tarfile

    info = tarfile.TarInfo("d/")
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    return gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT) * count + b"\0" * 1024, compresslevel=1)


def test_a_tar_of_many_members_is_read_without_holding_their_headers(tmp_path):
    """tarfile keeps every header it reads (tar.members): ~370 bytes a member, 1M (the limit)
    in a 5 MB tar.gz about 400 MB before the member limit; none is looked up again."""
    archive = tmp_path / "dirs.tar.gz"
    archive.write_bytes(_repeated_dirs_tar_gz(10_000))
    tracemalloc.start()
    try:
        extracted = extract_archive(archive, tmp_path / "out")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert extracted.entries == ["d"] and extracted.members == 10_000
    assert peak < 2 << 20, peak  # (holding them: 3.8 MB)
