"""A hostile review of safe extraction through `prefetch get`: member names, corrupt archives,
races and kills. The classic escapes are tests/test_archives_cli.py's and tests/test_extract.py's."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile

import pytest

from tests.helpers import write_registry
from tests.test_archives_cli import file_member, link_member, tar_bytes, world  # noqa: F401 - the fixture


def get_bytes(tmp_path, origin, name: str, archive: bytes, *args: str, sha: bool = True):
    """``prefetch get`` of a one-archive dataset, its output as bytes (member names need not be UTF-8)."""
    origin.put(name, archive)
    reg = write_registry(tmp_path / "registry.toml", "evil", origin.url_for(name),
                         sha256=hashlib.sha256(archive).hexdigest() if sha else None, extract=["somedir"])
    return subprocess.run([sys.executable, "-m", "prefetch", "get", "evil", "--registry", str(reg), *args],
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=120)


def test_a_newline_in_a_member_name_cannot_add_a_line_to_the_output(home, world, tmp_path):
    origin, _ = world
    forged = "a\ndownloaded evil.npz"
    archive = tar_bytes([file_member("ok.txt"), (tarfile.TarInfo(forged), b"x"),
                         (tarfile.TarInfo("tab\there"), b"y")])

    proc = get_bytes(tmp_path, origin, "names.tar.gz", archive)

    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    somedir = home / ".keras" / "datasets" / "somedir"
    assert lines[1:] == [f"extracted  {somedir}/a\\ndownloaded evil.npz", f"extracted  {somedir}/ok.txt",
                         f"extracted  {somedir}/tab\\there"], lines
    assert (somedir / forged).read_bytes() == b"x"  # the file itself keeps its real name


def test_a_gz_larger_than_the_free_space_is_a_full_disk_not_a_bomb(tmp_path):
    """torchvision's .gz files are decompressed beside themselves: one that does not fit is exit 5
    ("free some space"), as for a tar, not exit 6 ("unsafe archive", do not trust the source)."""
    import gzip
    import os
    import random

    from prefetch.archive.gunzip import decompress_gzip
    from prefetch.errors import DiskFullError, ExitCode
    from tests.test_disk import Tmpfs

    rng = random.Random(5)
    words = [bytes(rng.choice(b"abcdefghij") for _ in range(8)) for _ in range(300)]
    data = b" ".join(rng.choice(words) for _ in range(400_000))  # ~3.6 MB, about 1/4 of it gzipped
    fs = Tmpfs(tmp_path / "small").mount(size="2m")
    try:
        source = tmp_path / "train-images-idx3-ubyte.gz"
        source.write_bytes(gzip.compress(data))
        assert len(data) / source.stat().st_size < 200  # not a bomb by its ratio
        with pytest.raises(DiskFullError) as info:
            decompress_gzip(source, fs.path / "train-images-idx3-ubyte")
        assert info.value.exit_code == ExitCode.FILESYSTEM
        assert "no space left on the device" in str(info.value) and "free some space" in str(info.value)
        assert os.listdir(fs.path) == []  # no temp file left
    finally:
        fs.unmount()


def test_a_link_that_a_move_takes_outside_is_refused(tmp_path):
    """torchvision's rearrangements (SBDataset moves ``benchmark_RELEASE/dataset/cls`` up to the
    top) take a relative link to another depth: ``a/b/link -> ../../x`` is inside where the
    archive put it, and points outside once ``a/b`` is moved to ``b``."""
    from prefetch.archive.extract import extract_archive
    from prefetch.errors import UnsafeArchiveError

    def archive(link: str) -> bytes:
        return tar_bytes([file_member("x", b"inside"), file_member("a/b/f", b"f"),
                          link_member("a/b/link", link, tarfile.SYMTYPE)], mode="w")

    (tmp_path / "x").write_text("a file outside the extraction\n")
    bad = tmp_path / "bad.tar"
    bad.write_bytes(archive("../../x"))
    with pytest.raises(UnsafeArchiveError) as info:
        extract_archive(bad, tmp_path / "out", moves=[("a/b", "b")])
    assert "'b/link' is a link to '../../x', which resolves outside" in str(info.value)
    assert sorted(os.listdir(tmp_path)) == ["bad.tar", "x"]  # nothing placed, no temp dir left

    good = tmp_path / "good.tar"
    good.write_bytes(archive("f"))  # a link beside its target moves with it
    extract_archive(good, tmp_path / "out", moves=[("a/b", "b")])
    assert (tmp_path / "out" / "b" / "link").read_bytes() == b"f"


def test_a_link_out_of_the_subfolder_placed_is_refused(tmp_path):
    """Of a ``subfolder`` (torchvision's Middlebury: ``MiddEval3/testF``) only the contents are
    placed: ``sub/link -> ../x`` stays inside the archive's tree, and leaves the destination."""
    from prefetch.archive.extract import extract_archive
    from prefetch.errors import UnsafeArchiveError

    archive = tar_bytes([file_member("x", b"inside"), file_member("sub/f", b"f"),
                         link_member("sub/ok", "f", tarfile.SYMTYPE), link_member("sub/link", "../x", tarfile.SYMTYPE)],
                        mode="w")
    (tmp_path / "ar.tar").write_bytes(archive)
    (tmp_path / "x").write_text("a file outside the extraction\n")

    with pytest.raises(UnsafeArchiveError) as info:
        extract_archive(tmp_path / "ar.tar", tmp_path / "out", subfolder="sub")

    assert "'sub/link' is a link to '../x', which resolves outside the folder extracted" in str(info.value)
    assert sorted(os.listdir(tmp_path)) == ["ar.tar", "x"]


def test_a_truncated_archive_without_a_hash_is_not_kept(home, world, tmp_path):
    """No hash vouches for the bytes: a truncated archive is exit 4, one line, and neither the
    archive nor its partial is kept, so the same command downloads it again (and then works)."""
    origin, _ = world
    whole = tar_bytes([file_member("data.bin", os.urandom(300_000))])

    proc = get_bytes(tmp_path, origin, "trunc.tar.gz", whole[: len(whole) // 2], sha=False)

    err = proc.stderr.decode()
    assert proc.returncode == 4, err
    errors = [line for line in err.splitlines() if line.startswith("prefetch: error:")]
    assert len(errors) == 1 and "is corrupt or truncated" in errors[0], err
    assert "Nothing was extracted. The download was not kept (no expected hash to vouch for it)" in errors[0]
    datasets = home / ".keras" / "datasets"  # (made by this run and left empty: removed at its end)
    assert not datasets.exists()  # (neither the archive nor its partial)
    proc = get_bytes(tmp_path, origin, "trunc.tar.gz", whole, sha=False)  # the origin was fixed
    assert proc.returncode == 0, proc.stderr.decode()
    assert sorted(os.listdir(home / ".keras" / "datasets")) == ["somedir", "trunc.tar.gz"]
