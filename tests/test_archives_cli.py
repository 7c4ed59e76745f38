"""Hostile archives through `prefetch get`: exit 6, nothing written outside the target, nothing placed.

Each archive is served by the local origin as a dataset of a user registry whose file has
``extract = ["somedir"]`` and the archive's real sha256 (so verification passes and only
the extraction guard stands in the way). After each attempt:

* exit 6 and one `prefetch: error:` line naming the archive and the refusal;
* no file changed anywhere under the test's directory except prefetch's own state;
* no archive at the final path, no ``somedir``, no ``.part`` or temp dir left behind.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest

from prefetch.errors import ExitCode
from tests.helpers import write_registry
from tests.origin import OriginServer
from tests.test_bad_input import one_error_line

# --------------------------------------------------------------------------- archive builders


def tar_bytes(members: list[tuple[tarfile.TarInfo, bytes | None]], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return buf.getvalue()


def file_member(name: str, data: bytes = b"payload\n") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def link_member(name: str, target: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def special_member(name: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.devmajor, info.devminor = 1, 3  # /dev/null's numbers
    return info, None


def zip_bytes(entries: list[tuple[str, bytes]], *, compression=zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as zf:
        for name, data in entries:
            info = zipfile.ZipInfo(name)
            info.compress_type = compression
            zf.writestr(info, data)
    return buf.getvalue()


def zip_symlink(name: str, target: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo(name)
        info.create_system = 3  # unix
        info.external_attr = (0o120777 << 16)  # S_IFLNK
        zf.writestr(info, target)
        zf.writestr("somedir-file/pwned.txt", b"x")
        zf.writestr(f"{name}/pwned.txt", b"written through the link")
    return buf.getvalue()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def world(home, tmp_path):
    """An origin, a sentinel directory outside the target, and a snapshot of everything."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("original\n")
    with OriginServer() as origin:
        yield origin, outside


def snapshot(root: Path, *, skip: Path) -> dict[str, tuple[int, bytes]]:
    """Every path under ``root`` (except ``skip``) with its type and content."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        if here == skip or skip in here.parents:
            continue
        for name in dirnames + filenames:
            path = here / name
            if path == skip:
                continue
            st = os.lstat(path)
            content = path.read_bytes() if path.is_file() and not path.is_symlink() else os.readlink(path).encode() if path.is_symlink() else b""
            found[str(path.relative_to(root))] = (st.st_mode, content)
    return found


def get_archive(cli, origin: OriginServer, home: Path, tmp_path: Path, name: str, archive: bytes):
    origin.put(name, archive)
    registry = write_registry(tmp_path / "registry.toml", "evil", origin.url_for(name),
                              sha256=hashlib.sha256(archive).hexdigest(), extract=["somedir"])
    return cli("get", "evil", "--registry", str(registry), "-q")


def assert_refused(cli, world, home, tmp_path, name: str, archive: bytes, *expect: str) -> str:
    origin, outside = world
    before = snapshot(tmp_path, skip=home / ".prefetch")
    proc = get_archive(cli, origin, home, tmp_path, name, archive)
    line = one_error_line(proc, ExitCode.UNSAFE_ARCHIVE)
    assert "unsafe archive" in line
    for text in expect:
        assert text in line, line
    after = snapshot(tmp_path, skip=home / ".prefetch")
    datasets = home / ".keras" / "datasets"
    created = sorted(set(after) - set(before))
    changed = sorted(k for k in before if k in after and before[k] != after[k])
    # The only new things may be the registry and the (empty) Keras dirs themselves.
    unexpected = [c for c in created if c != "registry.toml" and not (c.startswith("home/.keras") and (tmp_path / c).is_dir())]
    assert unexpected == [], unexpected
    assert [c for c in changed if c != "registry.toml"] == [], changed
    assert (outside / "victim.txt").read_text() == "original\n"
    assert sorted(os.listdir(outside)) == ["victim.txt"]
    if datasets.exists():
        assert os.listdir(datasets) == [], os.listdir(datasets)  # no archive, no somedir, no .part, no temp
    return line


# --------------------------------------------------------------------------- the attacks


def test_benign_archive_is_extracted(cli, world, home, tmp_path):
    """The harness itself works: a well-behaved archive gives exit 0 and its files."""
    origin, _ = world
    archive = tar_bytes([file_member("pkg/a.txt", b"hello\n")])
    proc = get_archive(cli, origin, home, tmp_path, "good.tar.gz", archive)
    assert proc.returncode == 0, proc.stderr
    datasets = home / ".keras" / "datasets"
    assert (datasets / "somedir" / "pkg" / "a.txt").read_bytes() == b"hello\n"
    assert (datasets / "good.tar.gz").read_bytes() == archive


def test_absolute_member_path(cli, world, home, tmp_path):
    _, outside = world
    target = outside / "abs.txt"
    archive = tar_bytes([file_member("pkg/ok.txt"), file_member(str(target), b"pwned")])
    assert_refused(cli, world, home, tmp_path, "abs.tar.gz", archive, "absolute")
    assert not target.exists()


def test_dot_dot_member_path(cli, world, home, tmp_path):
    archive = tar_bytes([file_member("pkg/ok.txt"), file_member("pkg/../../../../outside/dotdot.txt", b"pwned")])
    assert_refused(cli, world, home, tmp_path, "dotdot.tar.gz", archive, "'..'")


def test_symlink_escape_then_write_through_it(cli, world, home, tmp_path):
    _, outside = world
    archive = tar_bytes([
        link_member("pkg/link", str(outside), tarfile.SYMTYPE),
        file_member("pkg/link/through.txt", b"pwned"),
    ])
    assert_refused(cli, world, home, tmp_path, "symlink.tar.gz", archive, "symlink")
    assert not (outside / "through.txt").exists()


def test_relative_symlink_escape(cli, world, home, tmp_path):
    archive = tar_bytes([link_member("pkg/up", "../../../../outside", tarfile.SYMTYPE)])
    assert_refused(cli, world, home, tmp_path, "relsymlink.tar.gz", archive, "outside the extraction directory")


def test_hardlink_escape_then_overwrite(cli, world, home, tmp_path):
    _, outside = world
    victim = outside / "victim.txt"
    archive = tar_bytes([
        link_member("pkg/hl", str(victim), tarfile.LNKTYPE),
        file_member("pkg/hl", b"pwned through a hard link\n"),
    ])
    # Refused by prefetch's own check (the stdlib's data filter, where there is one, has other words).
    assert_refused(cli, world, home, tmp_path, "hardlink.tar.gz", archive, "absolute hard link target")
    assert victim.read_text() == "original\n"


def test_hardlink_with_dot_dot(cli, world, home, tmp_path):
    archive = tar_bytes([link_member("pkg/hl", "../../../outside/victim.txt", tarfile.LNKTYPE)])
    assert_refused(cli, world, home, tmp_path, "hardlink2.tar.gz", archive, "'..' component in its hard link target")


@pytest.mark.parametrize("kind, label, why", [(tarfile.CHRTYPE, "char", "is a character device"),
                                              (tarfile.BLKTYPE, "block", "is a block device"),
                                              (tarfile.FIFOTYPE, "fifo", "is a FIFO")], ids=["char", "block", "fifo"])
def test_device_and_fifo_members(cli, world, home, tmp_path, kind, label, why):
    archive = tar_bytes([file_member("pkg/ok.txt"), special_member(f"pkg/{label}", kind)])
    assert_refused(cli, world, home, tmp_path, f"{label}.tar.gz", archive, f"member 'pkg/{label}' {why}")


def test_zip_slip(cli, world, home, tmp_path):
    archive = zip_bytes([("pkg/ok.txt", b"fine"), ("../../../outside/slip.txt", b"pwned")])
    assert_refused(cli, world, home, tmp_path, "slip.zip", archive, "'..'")


def test_zip_absolute_and_backslash_names(cli, world, home, tmp_path):
    archive = zip_bytes([("pkg/ok.txt", b"fine"), ("..\\..\\outside\\win.txt", b"pwned")])
    assert_refused(cli, world, home, tmp_path, "winslip.zip", archive, "'..'")
    archive = zip_bytes([("/outside/abs.txt", b"pwned")])
    assert_refused(cli, world, home, tmp_path, "zipabs.zip", archive, "absolute")


def test_zip_symlink_escape(cli, world, home, tmp_path):
    _, outside = world
    assert_refused(cli, world, home, tmp_path, "ziplink.zip", zip_symlink("pkg/link", str(outside)),
                   "member 'pkg/link' is a symlink to the absolute path")


def test_tar_decompression_bomb(cli, world, home, tmp_path):
    archive = tar_bytes([file_member("pkg/zeros.bin", bytes(64 << 20))])
    assert len(archive) < 200_000
    line = assert_refused(cli, world, home, tmp_path, "bomb.tar.gz", archive, "decompression bomb")
    assert "bomb.tar.gz" in line


def test_zip_decompression_bomb(cli, world, home, tmp_path):
    archive = zip_bytes([(f"pkg/zeros{i}.bin", bytes(16 << 20)) for i in range(4)])
    assert len(archive) < 200_000
    assert_refused(cli, world, home, tmp_path, "bomb.zip", archive, "decompression bomb")
