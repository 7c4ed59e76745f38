"""A hostile review of safe extraction through `prefetch get`: member names, corrupt archives,
races and kills. The classic escapes are tests/test_archives_cli.py's and tests/test_extract.py's."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile

import pytest

from tests.helpers import write_registry
from tests.test_archives_cli import file_member, tar_bytes, world  # noqa: F401 - the fixture


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
