"""A tar of more members than the limit was refused only after extracting up to the limit (~80 us a
member: a million in ~80 s and more). Once an extraction projects more than half the limit, the
members are now counted ahead from the archive's headers alone (archive/tar_count.py) and one past
the limit is refused at once, naming the count ahead; an archive within the limit, in every header
format tarfile reads, is counted exactly as tarfile counts it and extracted whole."""

from __future__ import annotations

import gzip
import io
import os
import tarfile

import pytest

from prefetch.archive.extract import extract_archive
from prefetch.archive.tar_count import count_members
from prefetch.errors import UnsafeArchiveError


def _repeated_dirs_tar_gz(count: int) -> bytes:
    info = tarfile.TarInfo("d/")
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    return gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT) * count + b"\0" * 1024, compresslevel=1)


def test_one_past_the_limit_is_refused_by_the_count_ahead(tmp_path):
    archive = tmp_path / "dirs.tar.gz"
    archive.write_bytes(_repeated_dirs_tar_gz(50_001))
    with pytest.raises(UnsafeArchiveError, match="more than 50000 members") as caught:
        extract_archive(archive, tmp_path / "out", max_members=50_000)
    assert "counted ahead" in str(caught.value)  # (not reached member by member)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dirs.tar.gz"]
    extracted = extract_archive(archive, tmp_path / "out", max_members=50_001)  # at the limit: extracted
    assert extracted.members == 50_001 and extracted.entries == ["d"]


def _members(fmt: int, count: int, *, pax_size: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        top = tarfile.TarInfo("top")
        top.type = tarfile.DIRTYPE
        tar.addfile(top)
        for i in range(count):
            name = f"top/{'long-' * 30 if i % 3 == 0 else ''}f{i}"  # (some past 100 bytes: L or x headers)
            data = b"x" * (i % 700)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if pax_size and fmt == tarfile.PAX_FORMAT:
                info.pax_headers = {"size": str(len(data)), "comment": "size=999\n"}
            tar.addfile(info, io.BytesIO(data))
            if i % 5 == 0:
                link = tarfile.TarInfo(f"top/l{i}")
                link.type, link.linkname = tarfile.SYMTYPE, f"f{i}"
                tar.addfile(link)
            if i % 7 == 0:
                hard = tarfile.TarInfo(f"top/h{i}")
                hard.type, hard.linkname = tarfile.LNKTYPE, name
                tar.addfile(hard)
    return buf.getvalue()


@pytest.mark.parametrize("fmt,pax_size", [(tarfile.USTAR_FORMAT, False), (tarfile.GNU_FORMAT, False),
                                          (tarfile.PAX_FORMAT, False), (tarfile.PAX_FORMAT, True)],
                         ids=["ustar-short", "gnu", "pax", "pax-size"])
@pytest.mark.parametrize("compression", ["", "gz", "xz"])
def test_the_count_is_tarfiles_and_an_archive_within_the_limit_extracts(tmp_path, fmt, pax_size, compression):
    if fmt == tarfile.USTAR_FORMAT:
        data = _members(tarfile.GNU_FORMAT, 0)  # (ustar cannot hold the long names: the top folder alone)
    else:
        data = _members(fmt, 1500, pax_size=pax_size)
    expected = len(tarfile.open(fileobj=io.BytesIO(data)).getmembers())
    if compression == "gz":
        data = gzip.compress(data)
    elif compression == "xz":
        import lzma

        data = lzma.compress(data)
    archive = tmp_path / f"a.tar{'.' + compression if compression else ''}"
    archive.write_bytes(data)
    fd = os.open(archive, os.O_RDONLY)
    try:
        assert count_members(fd, compression, limit=10**6) == expected
        assert count_members(fd, compression, limit=expected - 1) == expected if expected else True
    finally:
        os.close(fd)
    extracted = extract_archive(archive, tmp_path / "out", max_members=expected)  # (counted ahead: within)
    assert extracted.members == expected
    if expected > 1:
        with pytest.raises(UnsafeArchiveError, match=f"more than {expected - 1} members"):
            extract_archive(archive, tmp_path / "out2", max_members=expected - 1)


def test_a_pax_size_that_differs_from_the_header_is_followed_as_tarfile_does(tmp_path):
    """A pax ``size=`` overrides the next header's: the walk reads the data where tarfile does."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        inner = io.BytesIO()  # (the data is itself a tar: misread, its headers would be counted)
        with tarfile.open(fileobj=inner, mode="w", format=tarfile.USTAR_FORMAT) as nested:
            for i in range(20):
                nested.addfile(tarfile.TarInfo(f"n{i}"), io.BytesIO(b""))
        body = inner.getvalue()
        info = tarfile.TarInfo("inner.tar")
        info.size = len(body)
        info.pax_headers = {"size": str(len(body))}
        tar.addfile(info, io.BytesIO(body))
        tar.addfile(tarfile.TarInfo("after"), io.BytesIO(b""))
    data = bytearray(buf.getvalue())
    at = next(i for i in range(0, len(data), 512) if data[i:i + 9] == b"inner.tar" and data[i + 156] == ord("0"))
    data[at + 124:at + 136] = b"00000000000\0"  # its own header now says 0 bytes: only the pax size= is right
    data[at + 148:at + 156] = b" " * 8
    data[at + 148:at + 156] = b"%06o\0 " % sum(data[at:at + 512])
    archive = tmp_path / "p.tar"
    archive.write_bytes(bytes(data))
    fd = os.open(archive, os.O_RDONLY)
    try:
        assert count_members(fd, "", limit=1000) == 2 == len(tarfile.open(archive).getmembers())
    finally:
        os.close(fd)


def test_a_header_it_cannot_read_leaves_the_count_to_the_extraction(tmp_path):
    data = bytearray(_members(tarfile.GNU_FORMAT, 10))
    data[512 * 3 + 148] ^= 0x01  # a checksum digit changed
    archive = tmp_path / "bad.tar"
    archive.write_bytes(bytes(data))
    fd = os.open(archive, os.O_RDONLY)
    try:
        assert count_members(fd, "", limit=1) is None  # (never a guess: no refusal from the count)
    finally:
        os.close(fd)
