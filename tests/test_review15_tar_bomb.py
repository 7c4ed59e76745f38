"""A tar that lies to the member counter ahead (archive/tar_count.py, fourteenth sitting).

The count ahead runs once an extraction projects more than half the member limit, and walks the
rest of the decompressed stream. It had no byte bound of its own: a .tar.bz2 whose first thousand
tiny members set it off, followed by one member of terabytes of zeros (113 bytes of bz2 per
100 MiB), had it decompress all of them (~190 MB/s: hours) before the extraction, which refuses
that member at once by its size (the ratio limit), went on. The walk now stops where the
extraction's own limits would: a declared size past them ends it at once."""

from __future__ import annotations

import bz2
import io
import resource
import subprocess
import sys
import tarfile

import pytest

from prefetch.archive.tar_count import count_members
from tests.nginx import NginxServer

ZEROS = 100 << 20  # bytes of zeros in one bz2 stream


def _bomb(members: int, streams: int) -> bytes:
    """A .tar.bz2: ``members`` one-byte files, then big.bin of ``streams`` x 100 MiB of zeros (bz2
    streams back to back, as bzip2 and Python read them)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(members):
            info = tarfile.TarInfo(f"small/{i}")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        big = tarfile.TarInfo("big.bin")
        big.size = streams * ZEROS
        head = buf.getvalue()[: buf.tell()] + big.tobuf(format=tarfile.GNU_FORMAT)
    zeros = bz2.compress(b"\0" * ZEROS, 9)
    return bz2.compress(head, 9) + zeros * streams + bz2.compress(b"\0" * 1024, 9)  # (+ the end blocks)


def _cpu_limit():
    resource.setrlimit(resource.RLIMIT_CPU, (60, 60))  # (a guard against a walk of hours, not a speed check)


def test_a_bz2_bomb_after_many_tiny_members_is_refused_by_its_size_not_walked(home, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    (root / "bomb.tar.bz2").write_bytes(_bomb(1100, 90_000))  # ~10 MB: 8.8 TiB of zeros
    out = tmp_path / "out"
    with NginxServer(root) as nginx:
        got = subprocess.run([sys.executable, "-m", "prefetch", "get", nginx.url_for("bomb.tar.bz2"), "--extract",
                              "-P", str(out)], capture_output=True, text=True, timeout=300,
                             stdin=subprocess.DEVNULL, preexec_fn=_cpu_limit, cwd=tmp_path)
    assert got.returncode > 0, (got.returncode, got.stderr[-2000:])  # (-24: SIGXCPU, the walk still going)
    assert "unsafe archive" in got.stderr and "big.bin" in got.stderr, got.stderr[-2000:]
    assert "Traceback" not in got.stderr
    assert not (out / "small").exists() and not (out / "big.bin").exists()


def test_the_count_ahead_stops_at_its_byte_bound(tmp_path):
    archive = tmp_path / "bomb.tar.bz2"
    archive.write_bytes(_bomb(10, 3))
    with archive.open("rb") as f:
        assert count_members(f.fileno(), "bz2", limit=100) == 11  # (unbounded: the whole walk)
        assert count_members(f.fileno(), "bz2", limit=100, max_bytes=1 << 20) is None  # (big.bin is past it)


def _tar_of_tars(outer_members: int, inner_members: int) -> bytes:
    """A plain tar: ``outer_members`` tiny files, then inner.tar (a tar of ``inner_members`` folders,
    as a webdataset shard holds tars) whose pax header has a real ``size`` record and then a
    ``comment`` whose value holds a newline and ``1 size=0`` (a record's text, not a record)."""
    inner_buf = io.BytesIO()
    with tarfile.open(fileobj=inner_buf, mode="w", format=tarfile.USTAR_FORMAT) as inner:
        for i in range(inner_members):
            info = tarfile.TarInfo(f"d{i}")
            info.type = tarfile.DIRTYPE
            inner.addfile(info)
    data = inner_buf.getvalue()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(outer_members):
            info = tarfile.TarInfo(f"small/{i}")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        info = tarfile.TarInfo("inner.tar")
        info.size = len(data)
        info.pax_headers = {"size": str(len(data)), "comment": "made by hand\n1 size=0"}
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_pax_value_that_reads_like_a_size_record_is_not_one(tmp_path):
    """tarfile reads pax records by their length: a value's text is never a record. The count
    ahead read ``size=`` anywhere after a newline, so it took inner.tar's size as 0, walked into
    its data and counted the inner tar's folders: 4,101 members where tarfile yields 1,101, and
    an archive within the limit was refused."""
    from prefetch.archive.extract import extract_archive

    archive = tmp_path / "shards.tar"
    archive.write_bytes(_tar_of_tars(1100, 3000))
    with tarfile.open(archive) as tar:
        assert len(tar.getmembers()) == 1101
    with archive.open("rb") as f:
        assert count_members(f.fileno(), "", limit=10_000) == 1101
    extracted = extract_archive(archive, tmp_path / "out", max_members=2000)
    assert extracted.members == 1101
    assert (tmp_path / "out" / "inner.tar").read_bytes()[:2] == b"d0"


def test_a_global_pax_size_counts_for_later_pax_headed_members_as_in_tarfile(tmp_path):
    """tarfile takes a global header's ``size`` for every later member with a pax header of its
    own (that member's data then ends where the global size says). The count ahead ignored
    global headers: where tarfile found a member inside the data, the count did not."""
    ghost = tarfile.TarInfo("ghost")
    ghost.size = 0
    data = ghost.tobuf(format=tarfile.USTAR_FORMAT) * 3
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"size": "0"}) as tar:
        info = tarfile.TarInfo("a/" + "long-name-" * 12)  # (past 100 bytes: a pax header of its own)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tail = tarfile.TarInfo("tail")
        tar.addfile(tail, io.BytesIO(b""))
    archive = tmp_path / "global.tar"
    archive.write_bytes(buf.getvalue())
    with tarfile.open(archive) as tar:
        names = [m.name for m in tar.getmembers()]
    assert names.count("ghost") == 3 and names[-1] == "tail", names  # (tarfile's reading, which the count follows)
    with archive.open("rb") as f:
        assert count_members(f.fileno(), "", limit=100) == len(names), names


def _sparse_bomb(members: int, streams: int) -> bytes:
    """A .tar.bz2: ``members`` one-byte files, then an old-GNU sparse header ('S') whose extension
    blocks go on (each says another follows) for ``streams`` x 100 MiB: 153 bytes of bz2 each."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for i in range(members):
            info = tarfile.TarInfo(f"small/{i}")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        head = buf.getvalue()[: buf.tell()]
    sparse = bytearray(tarfile.TarInfo("holes.bin").tobuf(format=tarfile.GNU_FORMAT))
    sparse[156] = ord("S")
    sparse[482] = 1  # (extension blocks follow)
    sparse[148:156] = b" " * 8
    sparse[148:156] = b"%06o\0 " % sum(sparse)
    extension = b"\0" * 504 + b"\x01" + b"\0" * 7  # (no extents; another block follows)
    more = bz2.compress(extension * (ZEROS // 512), 9)
    return bz2.compress(head + bytes(sparse), 9) + more * streams


def test_endless_sparse_extension_blocks_end_the_count_at_the_byte_bound(tmp_path):
    """The count read an old-GNU sparse member's extension blocks one by one for as long as each
    said another follows, outside any bound: 2 TiB of them (3 MB of bz2) after a thousand tiny
    members kept it reading for hours before the extraction, which refuses at its byte limit,
    went on. Each extension block now counts against the bound."""
    archive = tmp_path / "holes.tar.bz2"
    archive.write_bytes(_sparse_bomb(1100, 20_000))
    code = ("import sys\n"
            "from prefetch.archive.extract import extract_archive\n"
            "from prefetch.errors import PrefetchError\n"
            "try:\n"
            "    extract_archive(sys.argv[1], sys.argv[2], max_bytes=10 << 20, max_members=2000)\n"
            "except PrefetchError as exc:\n"
            "    print(type(exc).__name__, exc)\n")
    got = subprocess.run([sys.executable, "-c", code, str(archive), str(tmp_path / "out")], capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL, preexec_fn=_cpu_limit)
    assert got.returncode == 0, (got.returncode, got.stderr[-2000:])  # (-9/-24: the CPU guard, the count still reading)
    assert got.stdout.startswith("UnsafeArchiveError") or got.stdout.startswith("IntegrityError"), got.stdout
    assert not (tmp_path / "out").exists()
