"""Safe extraction: normal cases, the Keras layouts, every attack, bombs and corrupt archives.

Every archive is built here with tarfile/zipfile. Attack tests snapshot the whole tmp tree
before and after: nothing may appear, change or be left behind outside the destination.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prefetch.errors import DiskFullError, ExitCode, IntegrityError, LocalFileError, UnsafeArchiveError, UsageError
from prefetch.archive.extract import ExtractResult, detect_format, extract_archive
from prefetch.archive.format import _filesystem_error

TAR_MODES = {"tar": "w", "gz": "w:gz", "bz2": "w:bz2", "xz": "w:xz"}
MTIME = 1_700_000_000


# -- builders -----------------------------------------------------------------------
def tfile(name: str, data: bytes = b"data", mode: int = 0o644):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, MTIME
    return info, data


def tdir(name: str, mode: int = 0o755):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, MTIME
    return info, None


def tsym(name: str, target: str):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
    return info, None


def thard(name: str, target: str):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = tarfile.LNKTYPE, target, 0o644
    return info, None


def tspecial(name: str, kind: bytes):
    info = tarfile.TarInfo(name)
    info.type, info.mode = kind, 0o644
    info.devmajor, info.devminor = 1, 3
    return info, None


def build_tar(path: Path, members, *, compression: str = "gz", **kwargs) -> Path:
    with tarfile.open(path, TAR_MODES[compression], format=tarfile.PAX_FORMAT, **kwargs) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def zentry(name: str, data: bytes = b"data", *, unix_mode: int | None = 0o100644):
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6))
    info.compress_type = zipfile.ZIP_DEFLATED
    if unix_mode is not None:
        info.create_system = 3
        info.external_attr = unix_mode << 16
    return info, data


def build_zip(path: Path, entries) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for info, data in entries:
            zf.writestr(info, data)
    return path


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under ``root`` with its kind, content hash / link target and mode."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st_ = os.lstat(path)
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(st_.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st_.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st_.st_mode))
            else:
                out[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest(), stat.S_IMODE(st_.st_mode))
    return out


def leftovers(directory: Path) -> list[str]:
    return [n for n in os.listdir(directory) if ".extract-" in n or ".old-" in n]


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@dataclass
class Workspace:
    root: Path  # snapshot this
    work: Path  # where destinations go
    outside: Path  # what attacks aim at
    archives: Path

    @property
    def dest(self) -> Path:
        return self.work / "dest"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    w = Workspace(tmp_path, tmp_path / "a" / "work", tmp_path / "outside", tmp_path / "archives")
    for d in (w.work, w.outside, w.archives):
        d.mkdir(parents=True)
    (w.outside / "secret.txt").write_text("do not touch")
    return w


def assert_refused(
    ws: Workspace, archive: Path, exc_type=UnsafeArchiveError, *, dest: Path | None = None, **kwargs
):
    """Extraction must raise ``exc_type`` and leave the whole tree exactly as it was."""
    dest = dest or ws.dest
    before = snapshot(ws.root)
    with pytest.raises(exc_type) as info:
        extract_archive(archive, dest, **kwargs)
    assert snapshot(ws.root) == before
    assert leftovers(dest.parent) == []
    assert str(archive) in str(info.value)
    return info.value


# -- normal extraction ------------------------------------------------------------------
@pytest.mark.parametrize("compression", sorted(TAR_MODES))
def test_tar_into_missing_destination(ws: Workspace, compression: str) -> None:
    archive = build_tar(
        ws.archives / f"pkg_{compression}_archive",
        [
            tdir("pkg"),
            tfile("pkg/readme.txt", b"hello\n", mode=0o664),
            tfile("pkg/run.sh", b"#!/bin/sh\n", mode=0o4775),
            tfile("pkg/noexec", b"x", mode=0o655),
            tfile("pkg/deep/nested/file.bin", bytes(range(256)) * 40),
            tsym("pkg/link", "readme.txt"),
            tsym("pkg/deep/up", "../readme.txt"),
            thard("pkg/hard", "pkg/readme.txt"),
        ],
        compression=compression,
    )
    result = extract_archive(archive, ws.dest)

    assert result == ExtractResult(destination=ws.dest, entries=["pkg"], members=8, bytes=6 + 10 + 1 + 10240)
    pkg = ws.dest / "pkg"
    assert (pkg / "readme.txt").read_bytes() == b"hello\n"
    assert (pkg / "deep/nested/file.bin").read_bytes() == bytes(range(256)) * 40
    assert os.readlink(pkg / "link") == "readme.txt" and (pkg / "link").read_bytes() == b"hello\n"
    assert (pkg / "deep/up").read_bytes() == b"hello\n"
    assert os.path.samefile(pkg / "hard", pkg / "readme.txt")
    # "data" filter modes: no setuid, no group/other write, exec only if the owner had it.
    assert stat.S_IMODE(os.stat(pkg / "readme.txt").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(pkg / "run.sh").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(pkg / "noexec").st_mode) == 0o644
    assert os.stat(pkg / "readme.txt").st_mtime == MTIME
    # The destination gets normal permissions, not the private temp dir's 0700.
    assert stat.S_IMODE(os.stat(ws.dest).st_mode) == 0o777 & ~current_umask()
    assert leftovers(ws.work) == []


def test_zip_into_missing_destination(ws: Workspace) -> None:
    archive = build_zip(
        ws.archives / "bundle_archive",
        [
            zentry("bundle/", b"", unix_mode=0o40755),
            zentry("bundle/a.txt", b"alpha"),
            zentry("bundle/tool", b"#!", unix_mode=0o100777),
            zentry("bundle/win\\style.txt", b"backslash", unix_mode=None),
            zentry("bundle/link", b"a.txt", unix_mode=0o120777),
            zentry("top.txt", b"top"),
        ],
    )
    result = extract_archive(archive, ws.dest)

    assert result.entries == ["bundle", "top.txt"]
    assert result.members == 6
    assert result.bytes == len(b"alpha#!backslashtop")
    assert (ws.dest / "bundle/a.txt").read_bytes() == b"alpha"
    assert (ws.dest / "bundle/win/style.txt").read_bytes() == b"backslash"
    assert os.readlink(ws.dest / "bundle/link") == "a.txt"
    assert stat.S_IMODE(os.stat(ws.dest / "bundle/tool").st_mode) == 0o755
    assert leftovers(ws.work) == []


def test_dot_slash_names_and_empty_archive(ws: Workspace) -> None:
    archive = build_tar(ws.archives / "dot.tgz", [tdir("./"), tdir("./d"), tfile("./d/f", b"1")])
    result = extract_archive(archive, ws.dest)
    assert result.entries == ["d"] and (ws.dest / "d/f").read_bytes() == b"1"

    empty = build_tar(ws.archives / "empty.tar", [], compression="tar")
    result = extract_archive(empty, ws.work / "empty")
    assert result.entries == [] and result.members == 0 and os.listdir(ws.work / "empty") == []


def test_existing_destination_replaces_entries_atomically(ws: Workspace) -> None:
    datasets = ws.work / "datasets"
    (datasets / "pkg/sub").mkdir(parents=True)
    (datasets / "pkg/old-only.txt").write_text("stale")
    (datasets / "pkg/common.txt").write_text("old")
    (datasets / "pkg/sub/x").write_text("old")
    (datasets / "mnist.npz").write_bytes(b"keep me")
    (datasets / "was-a-dir").mkdir()
    (datasets / "was-a-dir/inner").write_text("old")
    (datasets / "was-a-file").write_text("old")
    (datasets / "plain.txt").write_text("old")
    archive = build_tar(
        ws.archives / "update.tar.xz",
        [
            tfile("pkg/common.txt", b"new"),
            tfile("pkg/fresh.txt", b"fresh"),
            tfile("was-a-dir", b"now a file"),
            tfile("was-a-file/inner", b"now a dir"),
            tfile("plain.txt", b"new"),
        ],
        compression="xz",
    )
    result = extract_archive(archive, datasets)

    assert result.destination == datasets
    assert result.entries == ["pkg", "plain.txt", "was-a-dir", "was-a-file"]
    assert snapshot(datasets) == snapshot_of(
        {
            "mnist.npz": b"keep me",
            "pkg/common.txt": b"new",
            "pkg/fresh.txt": b"fresh",
            "was-a-dir": b"now a file",
            "was-a-file/inner": b"now a dir",
            "plain.txt": b"new",
        },
        ws.root / "expected",
    )
    assert leftovers(datasets) == [] and leftovers(ws.work) == []


def snapshot_of(files: dict[str, bytes], where: Path) -> dict[str, tuple]:
    """Build the expected tree with the same umask and snapshot it."""
    for rel, data in files.items():
        path = where / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, 0o644)
    return snapshot(where)


def cifar_members(top: str = "cifar-10-batches-py"):
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta", "readme.html"]
    return [tdir(top)] + [tfile(f"{top}/{n}", f"synthetic {n}".encode()) for n in names]


def test_keras_layouts(ws: Workspace) -> None:
    datasets = ws.work / ".keras" / "datasets"
    datasets.mkdir(parents=True)
    (datasets / "mnist.npz").write_bytes(b"npz")
    # Keras >= 3.6 names the archive without an extension; Keras 2 keeps .tar.gz.
    new_name = build_tar(datasets / "cifar-10-batches-py-target_archive", cifar_members())
    old_name = datasets / "cifar-10-batches-py.tar.gz"
    shutil.copyfile(new_name, old_name)
    # A half-written folder from an earlier crash must be replaced, not merged into.
    (datasets / "cifar-10-batches-py").mkdir()
    (datasets / "cifar-10-batches-py/data_batch_1").write_bytes(b"trunc")

    old = extract_archive(old_name, datasets)
    new = extract_archive(new_name, datasets / "cifar-10-batches-py-target")

    assert old.entries == new.entries == ["cifar-10-batches-py"]
    for base in (datasets, datasets / "cifar-10-batches-py-target"):
        folder = base / "cifar-10-batches-py"
        assert sorted(os.listdir(folder)) == sorted(
            [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch", "batches.meta", "readme.html"]
        )
        assert (folder / "data_batch_1").read_bytes() == b"synthetic data_batch_1"
    assert sorted(os.listdir(datasets)) == [
        "cifar-10-batches-py",
        "cifar-10-batches-py-target",
        "cifar-10-batches-py-target_archive",
        "cifar-10-batches-py.tar.gz",
        "mnist.npz",
    ]
    assert (datasets / "mnist.npz").read_bytes() == b"npz"


def test_destination_symlink_to_directory(ws: Workspace) -> None:
    real = ws.root / "bigdisk" / "datasets"
    real.mkdir(parents=True)
    link = ws.work / "datasets"
    link.symlink_to(real)
    archive = build_tar(ws.archives / "x.tgz", [tfile("f.txt", b"1")])

    extract_archive(archive, link)

    assert os.path.islink(link) and (real / "f.txt").read_bytes() == b"1"
    assert leftovers(real.parent) == [] and leftovers(ws.work) == []


def test_later_duplicate_replaces_a_link_without_following_it(ws: Workspace) -> None:
    archive = build_tar(
        ws.archives / "dup.tgz",
        [tfile("b", b"original"), tsym("a", "b"), tfile("a", b"replacement")],
    )
    extract_archive(archive, ws.dest)
    assert not os.path.islink(ws.dest / "a")
    assert (ws.dest / "a").read_bytes() == b"replacement"
    assert (ws.dest / "b").read_bytes() == b"original"


# -- attacks --------------------------------------------------------------------------------
def _tar_attacks(outside: Path):
    """name -> (members, what the error must say: the member and why)."""
    secret = str(outside / "secret.txt")
    return {
        "absolute-path": (
            [tfile(str(outside / "abs.txt"), b"pwned")],
            f"member {str(outside / 'abs.txt')!r} has an absolute path",
        ),
        "dotdot": ([tfile("../escaped.txt", b"pwned")], "member '../escaped.txt' has a '..' component"),
        "dotdot-nested": ([tdir("ok"), tfile("ok/../../../outside/secret.txt", b"pwned")], "'..' component"),
        "dotdot-backslash": ([tfile("..\\..\\escaped.txt", b"pwned")], "'..' component"),
        "symlink-absolute": ([tsym("evil", str(outside))], "member 'evil' is a symlink to the absolute path"),
        "symlink-relative-escape": (
            [tdir("d"), tsym("d/evil", "../../../outside")],
            "member 'd/evil' is a symlink to '../../../outside', outside",
        ),
        "symlink-chain-escape": (
            [tsym("l1", "."), tsym("l2", "l1/l1/../..")],
            "member 'l2' is a link to 'l1/l1/../..', which resolves outside",
        ),
        # Each link is harmless when written; together "l2" points outside (caught by the final audit).
        "symlink-order-trick": (
            [tsym("l2", "a/.."), tsym("a", ".")],
            "member 'l2' is a link to 'a/..', which resolves outside",
        ),
        "hardlink-absolute": ([thard("h", secret)], "member 'h' has an absolute hard link target"),
        "hardlink-dotdot": (
            [thard("h", "../../../outside/secret.txt")],
            "member 'h' has a '..' component in its hard link target",
        ),
        "hardlink-through-symlink": (
            [tsym("s", "."), thard("h", "s/nothing")],
            "member 'h' is a hard link to 's/nothing', which is not a regular file",
        ),
        "hardlink-to-missing": ([thard("h", "never-extracted")], "not a regular file extracted earlier"),
        "write-through-inside-symlink": (
            [tdir("real"), tsym("link", "real"), tfile("link/payload", b"x")],
            "member 'link/payload' would be written through the symlink 'link'",
        ),
        "write-through-escaping-symlink": (
            [tsym("link", "../../../outside"), tfile("link/secret.txt", b"x")],
            "member 'link' is a symlink",
        ),
        "duplicate-file-then-escaping-link": (
            [tfile("a", b"1"), tsym("a", secret)],
            "member 'a' is a symlink to the absolute path",
        ),
        "dir-over-symlink": (
            [tsym("d", "."), tdir("d"), tfile("d/f", b"x")],
            "member 'd' is a directory but an earlier member",
        ),
        "char-device": ([tspecial("dev", tarfile.CHRTYPE)], "member 'dev' is a character device"),
        "block-device": ([tspecial("blk", tarfile.BLKTYPE)], "member 'blk' is a block device"),
        "fifo": ([tspecial("pipe", tarfile.FIFOTYPE)], "member 'pipe' is a FIFO"),
        "file-named-root": ([tfile(".", b"x")], "names the extraction directory itself"),
    }


TAR_ATTACKS = sorted(_tar_attacks(Path("/x")))


@pytest.mark.parametrize("attack", TAR_ATTACKS)
def test_tar_attacks_are_refused(ws: Workspace, attack: str) -> None:
    members, expected = _tar_attacks(ws.outside)[attack]
    archive = build_tar(ws.archives / f"{attack}_archive", members)
    error = assert_refused(ws, archive)
    assert error.exit_code == ExitCode.UNSAFE_ARCHIVE == 6
    assert expected in str(error)


@pytest.mark.parametrize("attack", TAR_ATTACKS)
def test_own_checks_suffice_without_the_stdlib_filter(ws: Workspace, attack: str, monkeypatch) -> None:
    """Pythons older than 3.10.12 / 3.11.4 have no tarfile.data_filter: our checks alone must hold."""
    monkeypatch.delattr(tarfile, "data_filter")
    members, expected = _tar_attacks(ws.outside)[attack]
    error = assert_refused(ws, build_tar(ws.archives / f"{attack}.tgz", members))
    assert expected in str(error)


def test_modes_without_the_stdlib_filter(ws: Workspace, monkeypatch) -> None:
    monkeypatch.delattr(tarfile, "data_filter")
    archive = build_tar(
        ws.archives / "modes.tgz",
        [tfile("suid", b"x", mode=0o6777), tfile("ro", b"x", mode=0o400), tfile("gx", b"x", mode=0o671)],
    )
    extract_archive(archive, ws.dest)
    modes = {n: stat.S_IMODE(os.stat(ws.dest / n).st_mode) for n in ("suid", "ro", "gx")}
    assert modes == {"suid": 0o755, "ro": 0o600, "gx": 0o640}  # as tarfile.data_filter


def test_attacks_leave_an_existing_destination_untouched(ws: Workspace) -> None:
    datasets = ws.work / "datasets"
    (datasets / "cifar-10-batches-py").mkdir(parents=True)
    (datasets / "cifar-10-batches-py/data_batch_1").write_bytes(b"good")
    archive = build_tar(
        ws.archives / "mixed.tgz",
        cifar_members() + [tfile("../../outside/secret.txt", b"pwned")],
    )
    assert_refused(ws, archive, dest=datasets)
    assert (datasets / "cifar-10-batches-py/data_batch_1").read_bytes() == b"good"


def _zip_attacks(outside: Path):
    return {
        "zip-slip-dotdot": [zentry("../evil.txt")],
        "zip-slip-nested": [zentry("ok/../../evil.txt")],
        "zip-slip-backslash": [zentry("..\\..\\evil.txt", unix_mode=None)],
        "zip-absolute": [zentry(str(outside / "evil.txt"))],
        "zip-drive-letter": [zentry("C:\\evil.txt", unix_mode=None)],
        "zip-drive-letter-slash": [zentry("C:/evil.txt", unix_mode=None)],
        "zip-symlink-escape": [zentry("evil", b"../../../outside", unix_mode=0o120777)],
        "zip-symlink-absolute": [zentry("evil", str(outside).encode(), unix_mode=0o120777)],
        "zip-symlink-write-through": [
            zentry("real/", b"", unix_mode=0o40755),
            zentry("link", b"real", unix_mode=0o120777),
            zentry("link/x", b"payload"),
        ],
        "zip-fifo": [zentry("pipe", b"", unix_mode=0o010644)],
        "zip-char-device": [zentry("dev", b"", unix_mode=0o020644)],
    }


@pytest.mark.parametrize("attack", sorted(_zip_attacks(Path("/x"))))
def test_zip_attacks_are_refused(ws: Workspace, attack: str) -> None:
    archive = build_zip(ws.archives / f"{attack}.zip", _zip_attacks(ws.outside)[attack])
    assert_refused(ws, archive)


# -- decompression bombs -------------------------------------------------------------------
FIFTY_MB = 50 << 20


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("bombs")
    tar_bomb = where / "zeros.tar.gz"
    with tarfile.open(tar_bomb, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo("zeros.bin")
        info.size = FIFTY_MB
        tar.addfile(info, io.BytesIO(bytes(FIFTY_MB)))
    zip_bomb = where / "zeros.zip"
    with zipfile.ZipFile(zip_bomb, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("zeros.bin", bytes(FIFTY_MB))
    return {"tar": tar_bomb, "zip": zip_bomb}


@pytest.mark.parametrize("kind", ["tar", "zip"])
@pytest.mark.parametrize(
    "limits",
    [{}, {"max_ratio": 50.0, "max_bytes": None}, {"max_bytes": 10 << 20, "max_ratio": float("inf")}],
    ids=["default-ratio", "low-ratio", "small-max-bytes"],
)
def test_decompression_bombs_are_refused(ws: Workspace, bombs, kind: str, limits: dict) -> None:
    archive = ws.archives / bombs[kind].name
    shutil.copyfile(bombs[kind], archive)
    assert os.path.getsize(archive) < FIFTY_MB / 100
    error = assert_refused(ws, archive, **limits)
    assert "decompression bomb" in str(error)


def test_limits_allow_what_fits(ws: Workspace) -> None:
    data = b"line of fairly repetitive text\n" * 70_000  # ~2 MiB, compresses ~100x
    archive = build_tar(ws.archives / "text.tgz", [tfile("t.txt", data)])
    assert_refused(ws, archive, max_ratio=20.0)
    assert_refused(ws, archive, max_bytes=len(data) - 1, max_ratio=float("inf"))
    result = extract_archive(archive, ws.dest, max_bytes=len(data), max_ratio=1000.0)
    assert result.bytes == len(data) and (ws.dest / "t.txt").read_bytes() == data


def test_too_many_members(ws: Workspace) -> None:
    members = [tfile(f"f{i}", b"x") for i in range(20)]
    assert_refused(ws, build_tar(ws.archives / "many.tgz", members), max_members=10)
    assert_refused(
        ws, build_zip(ws.archives / "many.zip", [zentry(f"f{i}") for i in range(20)]), max_members=10
    )
    assert extract_archive(ws.archives / "many.tgz", ws.dest, max_members=20).members == 20


def test_huge_tar_header_is_refused_before_it_is_read(ws: Workspace) -> None:
    """A pax header can hold megabytes that are never written: the stream itself is capped."""
    info, data = tfile("tiny", b"x")
    info.pax_headers = {"comment": "A" * (3 << 20)}
    archive = build_tar(ws.archives / "paxbomb.tgz", [(info, data)])
    error = assert_refused(ws, archive, max_bytes=100)
    assert "tar stream" in str(error)


def test_lying_zip_size_header_cannot_smuggle_bytes(ws: Workspace) -> None:
    """A zip whose headers claim 10 bytes but hold 5 MiB: only 10 are read, then the CRC fails."""
    path = build_zip(ws.archives / "liar.zip", [zentry("big.bin", bytes(5 << 20))])
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("big.bin")
    for offset in (18 + 4,):  # local header: uncompressed size at 22
        raw[info.header_offset + offset : info.header_offset + offset + 4] = (10).to_bytes(4, "little")
    central = raw.rfind(b"PK\x01\x02")
    raw[central + 24 : central + 28] = (10).to_bytes(4, "little")
    path.write_bytes(bytes(raw))
    assert_refused(ws, path, IntegrityError, max_bytes=1 << 20)


# -- corrupt archives ----------------------------------------------------------------------
def _payload(n: int = 200_000) -> bytes:
    return hashlib.sha256(b"seed").digest() * (n // 32)


@pytest.mark.parametrize("compression", ["gz", "bz2", "xz"])
def test_truncated_compressed_tar(ws: Workspace, compression: str) -> None:
    full = build_tar(
        ws.archives / "full",
        [tfile("a.bin", _payload()), tfile("b.bin", _payload())],
        compression=compression,
    )
    data = full.read_bytes()
    cut = ws.archives / f"cut-{compression}_archive"
    cut.write_bytes(data[: len(data) // 2])
    full.unlink()
    error = assert_refused(ws, cut, IntegrityError)
    assert error.exit_code == ExitCode.INTEGRITY == 4


def test_truncated_plain_tar_mid_member_and_at_header(ws: Workspace) -> None:
    full = build_tar(
        ws.archives / "full.tar",
        [tfile("a.bin", _payload(4096)), tfile("b.bin", _payload(4096))],
        compression="tar",
    )
    data = full.read_bytes()
    mid = ws.archives / "mid.tar"
    mid.write_bytes(data[:3000])
    assert_refused(ws, mid, IntegrityError)
    # Cut exactly after the first member: tarfile alone would call this a complete archive.
    boundary = ws.archives / "boundary.tar"
    boundary.write_bytes(data[: 512 + 4096])
    assert_refused(ws, boundary, IntegrityError)
    garbage = ws.archives / "garbage-header.tar"
    garbage.write_bytes(data[: 512 + 4096] + b"\x01" * 512 + data[512 + 4096 + 512 :])
    assert_refused(ws, garbage, IntegrityError)


def test_corrupt_gzip_crc_and_data(ws: Workspace) -> None:
    full = build_tar(ws.archives / "ok.tgz", [tfile("a.bin", _payload())])
    data = bytearray(full.read_bytes())
    crc = ws.archives / "badcrc.tgz"
    crc.write_bytes(bytes(data[:-8]) + bytes(b ^ 0xFF for b in data[-8:-4]) + bytes(data[-4:]))
    assert_refused(ws, crc, IntegrityError)
    flipped = ws.archives / "flipped.tgz"
    data[len(data) // 2] ^= 0xFF
    flipped.write_bytes(bytes(data))
    assert_refused(ws, flipped, IntegrityError)


def test_corrupt_zip(ws: Workspace) -> None:
    full = build_zip(ws.archives / "ok.zip", [zentry("a.bin", _payload()), zentry("b.bin", _payload())])
    data = full.read_bytes()
    truncated = ws.archives / "truncated.zip"
    truncated.write_bytes(data[: len(data) // 2])
    assert_refused(ws, truncated, IntegrityError)
    with zipfile.ZipFile(full) as zf:
        start = zf.getinfo("a.bin").header_offset + 30 + len("a.bin") + 10
    bad = bytearray(data)
    bad[start] ^= 0xFF
    (ws.archives / "baddata.zip").write_bytes(bytes(bad))
    assert_refused(ws, ws.archives / "baddata.zip", IntegrityError)


def test_not_an_archive(ws: Workspace) -> None:
    html = ws.archives / "cifar-10-python.tar.gz"
    html.write_bytes(b"<html><body>403 Forbidden</body></html>\n" * 30)
    error = assert_refused(ws, html, IntegrityError)
    assert "not a tar or zip" in str(error)
    plain_gz = ws.archives / "train-images-idx3-ubyte.gz"
    plain_gz.write_bytes(gzip.compress(b"\x00\x00\x08\x03" + bytes(5000)))
    assert "does not contain a tar" in str(assert_refused(ws, plain_gz, IntegrityError))
    empty = ws.archives / "empty.tgz"
    empty.write_bytes(b"")
    assert_refused(ws, empty, IntegrityError)


def test_format_mismatch_and_bad_arguments(ws: Workspace) -> None:
    zipped = build_zip(ws.archives / "really-a-zip.tar.gz", [zentry("a")])
    assert_refused(ws, zipped, IntegrityError, archive_format="tar")
    assert extract_archive(zipped, ws.dest, archive_format="zip").entries == ["a"]
    with pytest.raises(UsageError):
        extract_archive(zipped, ws.work / "other", archive_format="rar")


def test_local_file_errors(ws: Workspace) -> None:
    archive = build_tar(ws.archives / "a.tgz", [tfile("f")])
    with pytest.raises(LocalFileError, match="does not exist"):
        extract_archive(ws.archives / "missing.tgz", ws.dest)
    blocker = ws.work / "blocker"
    blocker.write_text("a file")
    error = assert_refused(ws, archive, LocalFileError, dest=blocker)
    assert "not a directory" in str(error) and error.exit_code == ExitCode.FILESYSTEM


def test_os_errors_map_to_exit_codes() -> None:
    full = _filesystem_error(
        OSError(28, "No space left on device", "/x"), archive=Path("a"), destination=Path("d")
    )
    denied = _filesystem_error(
        OSError(13, "Permission denied", "/x"), archive=Path("a"), destination=Path("d")
    )
    assert isinstance(full, DiskFullError) and full.exit_code == ExitCode.FILESYSTEM
    assert type(denied) is LocalFileError and "Permission denied" in str(denied)


# -- interruption ---------------------------------------------------------------------------
def test_keyboard_interrupt_mid_extraction_leaves_nothing(ws: Workspace, monkeypatch) -> None:
    archive = build_tar(ws.archives / "i.tgz", [tfile(f"f{i}", b"x") for i in range(5)])
    real_fchmod, calls = os.fchmod, []

    def interrupted(fd, mode):
        calls.append(fd)
        if len(calls) == 3:
            raise KeyboardInterrupt
        real_fchmod(fd, mode)

    monkeypatch.setattr(os, "fchmod", interrupted)
    before = snapshot(ws.root)
    with pytest.raises(KeyboardInterrupt):
        extract_archive(archive, ws.dest)
    assert snapshot(ws.root) == before and len(calls) == 3


def test_interrupt_while_swapping_restores_the_old_entry(ws: Workspace, monkeypatch) -> None:
    datasets = ws.work / "datasets"
    (datasets / "pkg").mkdir(parents=True)
    (datasets / "pkg/file").write_text("old")
    archive = build_tar(ws.archives / "swap.tgz", [tfile("pkg/file", b"new")])
    real_rename, calls = os.rename, []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # 1: old entry aside, 2: new entry in
            raise KeyboardInterrupt
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    before = snapshot(ws.root)
    with pytest.raises(KeyboardInterrupt):
        extract_archive(archive, datasets)
    assert len(calls) == 3  # 3: the old entry put back
    assert snapshot(ws.root) == before


# -- format detection -----------------------------------------------------------------------
def test_detect_format_by_content_not_name(ws: Workspace) -> None:
    a = ws.archives
    build_tar(a / "cifar-10-batches-py-target_archive", cifar_members())
    build_tar(a / "looks.zip", [tfile("x")], compression="bz2")
    build_tar(a / "plain.gz", [tfile("x")], compression="tar")
    build_tar(a / "no_extension", [tfile("x")], compression="xz")
    build_zip(a / "mnist.npz", [zentry("x_train.npy", b"\x93NUMPY")])
    build_zip(a / "archive.tar", [zentry("x")])
    (a / "data.tar.gz").write_bytes(gzip.compress(b"not a tar" * 100))
    (a / "random.tar").write_bytes(os.urandom(4096))
    (a / "zero").write_bytes(b"")

    assert {p.name: detect_format(p) for p in sorted(a.iterdir())} == {
        "archive.tar": "zip",
        "cifar-10-batches-py-target_archive": "tar",
        "data.tar.gz": None,
        "looks.zip": "tar",
        "mnist.npz": "zip",
        "no_extension": "tar",
        "plain.gz": "tar",
        "random.tar": None,
        "zero": None,
    }


# -- property: whatever the names, nothing escapes ----------------------------------------------
# Mostly plain names, so that both outcomes (refused / extracted) are common.
_COMPONENTS = ["a"] * 5 + ["b"] * 4 + ["..", ".", "", "C:", "..\\.."]
_names = st.lists(st.sampled_from(_COMPONENTS), min_size=1, max_size=4).map("/".join)
_members = st.lists(
    st.tuples(st.sampled_from(["file", "dir", "sym", "hard"]), _names, _names), min_size=1, max_size=5
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members=_members)
def test_no_member_names_escape(members) -> None:
    base = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        work = base / "w" / "x" / "work"
        work.mkdir(parents=True)
        (base / "secret").write_text("s")
        builders = {
            "file": lambda n, t: tfile(n, b"p"),
            "dir": lambda n, t: tdir(n),
            "sym": tsym,
            "hard": thard,
        }
        archive = build_tar(base / "fuzz.tar", [builders[k](n, t) for k, n, t in members], compression="tar")
        dest = work / "dest"
        before = snapshot(base)
        try:
            extract_archive(archive, dest)
        except (UnsafeArchiveError, IntegrityError):
            assert snapshot(base) == before
        else:
            after = snapshot(base)
            changed = {k for k in after if before.get(k) != after[k]}
            assert all(k == "w/x/work/dest" or k.startswith("w/x/work/dest/") for k in changed)
            assert before.keys() <= after.keys()
            for dirpath, dirnames, filenames in os.walk(dest):
                for name in dirnames + filenames:
                    real = os.path.realpath(os.path.join(dirpath, name))
                    assert os.path.commonpath([real, os.path.realpath(dest)]) == os.path.realpath(dest)
        assert leftovers(work) == []
    finally:
        shutil.rmtree(base)
