"""Safe tar/zip extraction: into a temp dir beside the target, checked member by member, then renamed.

Nothing is ever written outside a private temp directory until every member has been
checked and written; only then does the result move into place with ``os.rename``:

* destination missing: the temp dir itself is renamed to it (one atomic step);
* destination an existing directory (e.g. Keras' ``datasets/``): each top-level entry is
  moved in; an entry of the same name is first renamed aside, the new one renamed in, and
  the old one deleted, so the name holds a complete old or a complete new tree, never a
  half-written one.

The temp dir is removed on every error, ``KeyboardInterrupt`` included.

Safety policy (defence in depth: our own checks first, then ``tarfile.data_filter``
where the running Python has it, then a final audit of every symlink created):

* refused: absolute names (``/x``, ``\\x``, ``C:x``), ``..`` components (``/`` and ``\\``
  both count as separators), NUL bytes, device/FIFO/unknown members, symlinks whose
  target resolves outside the extraction root, hard links to anything but a regular file
  extracted earlier from the same archive, and any member whose path goes through a
  symlink extracted earlier (so "symlink, then write through it" cannot work, even for
  links that stay inside). A later member of the same name as an earlier file or link
  replaces it without following it; one that would replace a directory is refused.
* modes follow tar's "data" filter: no set-uid/gid/sticky bits, no group/other write,
  owner always gets read/write, executables stay executable; ownership is never changed.
* decompression bombs: the bytes actually written are counted while streaming (headers
  are only used to fail earlier) and compared with three limits:
  ``max_bytes`` (if given) and ``max_ratio`` x the archive's size raise
  ``UnsafeArchiveError``; the free space of the target filesystem (always checked) raises
  ``DiskFullError``. The ratio is not enforced below 1 MiB written, where no bomb can
  hurt. More than ``max_members`` members also raises ``UnsafeArchiveError``, and the
  decompressed tar stream itself may not exceed the byte limit plus header overhead (a
  tar can hide gigabytes in headers without writing a byte).
* corrupt, truncated or unrecognised archives raise ``IntegrityError``.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from prefetch.fsutil import remove_tree
from prefetch.errors import (
    DiskFullError,
    IntegrityError,
    LocalFileError,
    PrefetchError,
    UnsafeArchiveError,
    UsageError,
)

FORMATS = ("auto", "tar", "zip")
CHUNK = 1 << 20
RATIO_FLOOR = 1 << 20  # below this many bytes written the ratio limit is not applied
_TAR_OVERHEAD_PER_MEMBER = 8 << 10  # header, long-name/pax records and padding, generously
_TAR_OVERHEAD_FIXED = 1 << 20
_MAX_LINK_TARGET = 4096
_DRAIN_CHUNK = 64 << 10
_PEEK = 1024

_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
_GZIP_MAGIC = b"\x1f\x8b"
_XZ_MAGIC = b"\xfd7zXZ\x00"
_SEPARATORS = re.compile(r"[/\\]")
_DRIVE = re.compile(r"^[A-Za-z]:")
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class ExtractResult:
    """What ``extract_archive`` placed, and where."""

    destination: Path  # the directory the archive's contents ended up in
    entries: list[str]  # top-level names placed in destination
    members: int  # number of members extracted
    bytes: int  # total uncompressed bytes written


def detect_format(path: Path) -> str | None:
    """Return ``"tar"`` (plain, gz, bz2 or xz), ``"zip"`` or ``None``, judged by content, not name.

    A gzip/bz2/xz file counts as ``"tar"`` only if it decompresses to a tar header, so
    a plain ``.gz`` data file (fashion-mnist's) is ``None``; a ``.npz`` is a zip.

    Raises:
        LocalFileError: the file cannot be opened or read.
    """
    path = Path(path)
    with _open_archive(path) as raw:
        return _sniff(raw).format


def extract_archive(
    archive: Path,
    destination: Path,
    *,
    archive_format: str = "auto",
    max_bytes: int | None = None,
    max_ratio: float = 200.0,
    max_members: int = 1_000_000,
) -> ExtractResult:
    """Extract ``archive`` safely into ``destination`` (see the module docstring for the rules).

    Args:
        archive: a tar (plain/gz/bz2/xz) or zip file; its name does not matter.
        destination: directory to create, or existing directory to add the top-level
            entries to (replacing entries of the same name).
        archive_format: ``"auto"``, ``"tar"`` or ``"zip"``; an explicit format must match
            the content.
        max_bytes: most bytes the archive may expand to; ``None`` means no fixed cap (the
            free space of the target filesystem and ``max_ratio`` still apply).
        max_ratio: most bytes written per byte of archive (``math.inf`` disables it).
        max_members: most members (files, dirs, links) the archive may hold.

    Returns:
        ExtractResult with the destination, the top-level names placed, the member count
        and the bytes written.

    Raises:
        UnsafeArchiveError: a member would escape the target, is a device/FIFO, or the
            archive looks like a decompression bomb. Nothing was written.
        IntegrityError: the archive is corrupt, truncated, encrypted or not a tar/zip.
        DiskFullError: not enough free space.
        LocalFileError: the archive cannot be read or the destination cannot be written.
        UsageError: unknown ``archive_format``.
    """
    archive = Path(archive)
    destination = Path(destination)
    if archive_format not in FORMATS:
        raise UsageError(f"unknown archive format {archive_format!r}; expected one of {', '.join(FORMATS)}")
    if max_bytes is not None and max_bytes < 0:
        raise ValueError(f"max_bytes must be >= 0 or None, got {max_bytes}")
    if not max_ratio > 0:
        raise ValueError(f"max_ratio must be > 0, got {max_ratio}")
    if max_members < 0:
        raise ValueError(f"max_members must be >= 0, got {max_members}")

    with _open_archive(archive) as raw:
        sniffed = _sniff(raw)
        _check_format(archive, sniffed, archive_format)
        final = _resolve_destination(destination, archive=archive)
        temp: Path | None = None
        try:
            staging = _staging_parent(final)
            temp, temp_mode = _make_temp_dir(staging, final.name)
            ctx = _Extraction(
                archive=archive,
                root=Path(os.path.realpath(temp)),
                final_dir_mode=temp_mode,
                budget=_Budget(
                    archive=archive,
                    archive_size=os.fstat(raw.fileno()).st_size,
                    max_bytes=max_bytes,
                    max_ratio=max_ratio,
                    max_members=max_members,
                    free_bytes=shutil.disk_usage(temp).free,
                    free_where=staging,
                ),
            )
            if sniffed.format == "tar":
                _extract_tar(ctx, raw, sniffed.compression)
            else:
                _extract_zip(ctx, raw)
            ctx.audit_symlinks()
            entries = sorted(os.listdir(temp))
            os.chmod(temp, ctx.final_dir_mode)
            _install(temp, final)
        except OSError as exc:
            raise _filesystem_error(exc, archive=archive, destination=destination) from exc
        except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
            raise _corrupt(archive, exc) from exc
        finally:
            if temp is not None:
                remove_tree(temp)
    return ExtractResult(
        destination=destination, entries=entries, members=ctx.budget.members, bytes=ctx.budget.written
    )


# -- format detection ---------------------------------------------------------
@dataclass(frozen=True)
class _Sniffed:
    format: str | None  # "tar" | "zip" | None
    compression: str  # "" | "gz" | "bz2" | "xz"
    why: str  # when format is None: what we saw


def _open_archive(path: Path):
    try:
        return open(path, "rb")
    except FileNotFoundError as exc:
        raise LocalFileError(f"archive {path} does not exist; download it first") from exc
    except OSError as exc:
        raise LocalFileError(f"cannot open archive {path}: {exc.strerror or exc}") from exc


def _sniff(raw) -> _Sniffed:
    head = _read_raw(raw, _PEEK)
    raw.seek(0)
    if head.startswith(_ZIP_MAGICS):
        return _Sniffed("zip", "", "")
    if head.startswith(_GZIP_MAGIC):
        compression = "gz"
    elif head[:3] == b"BZh" and head[3:4] in b"123456789" and len(head) > 3:
        compression = "bz2"
    elif head.startswith(_XZ_MAGIC):
        compression = "xz"
    else:
        compression = ""
    if compression:
        try:
            inner = _open_decompressor(raw, compression)
            try:
                block = inner.read(_PEEK)
            finally:
                inner.close()
        except _DECOMPRESSION_ERRORS as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise LocalFileError(f"cannot read archive: {exc.strerror}") from exc
            return _Sniffed(
                None, compression, f"is {compression}-compressed but cannot be decompressed ({exc})"
            )
        finally:
            raw.seek(0)
        if _looks_like_tar(block):
            return _Sniffed("tar", compression, "")
        return _Sniffed(None, compression, f"is {compression}-compressed but does not contain a tar archive")
    if _looks_like_tar(head):
        return _Sniffed("tar", "", "")
    if not head:
        return _Sniffed(None, "", "is empty")
    return _Sniffed(None, "", f"starts with bytes {head[:8].hex(' ')}, which match no tar or zip format")


def _read_raw(raw, size: int) -> bytes:
    try:
        return raw.read(size)
    except OSError as exc:
        raise LocalFileError(
            f"cannot read archive {getattr(raw, 'name', '')}: {exc.strerror or exc}"
        ) from exc


def _looks_like_tar(block: bytes) -> bool:
    if len(block) < tarfile.BLOCKSIZE:
        return False
    if block[: 2 * tarfile.BLOCKSIZE] == bytes(2 * tarfile.BLOCKSIZE):
        return True  # an empty archive: just the end-of-archive marker
    try:
        tarfile.TarInfo.frombuf(block[: tarfile.BLOCKSIZE], "utf-8", "surrogateescape")
    except tarfile.HeaderError:
        return False
    return True


def _check_format(archive: Path, sniffed: _Sniffed, wanted: str) -> None:
    if sniffed.format is None:
        raise IntegrityError(
            f"{archive} is not a tar or zip archive: it {sniffed.why}; it may be truncated or an "
            "error page saved in its place. Delete it and download it again."
        )
    if wanted != "auto" and wanted != sniffed.format:
        raise IntegrityError(
            f"{archive} was expected to be a {wanted} archive but its content is a {sniffed.format} "
            "archive; check the registry entry or download it again."
        )


def _open_decompressor(raw, compression: str):
    if compression == "gz":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "bz2":
        import bz2

        return bz2.BZ2File(raw, mode="rb")
    if compression == "xz":
        import lzma

        return lzma.LZMAFile(raw, mode="rb")
    return raw


def _decompression_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError, EOFError, zlib.error]
    try:
        import lzma

        errors.append(lzma.LZMAError)
    except ImportError:  # pragma: no cover - Python built without lzma
        pass
    return tuple(errors)


_DECOMPRESSION_ERRORS = _decompression_errors()


# -- limits -----------------------------------------------------------------------
@dataclass
class _Budget:
    """Counts members and bytes written, raising as soon as a limit is passed."""

    archive: Path
    archive_size: int
    max_bytes: int | None
    max_ratio: float
    max_members: int
    free_bytes: int
    free_where: Path
    written: int = 0
    members: int = 0
    last_member: str = ""

    @property
    def ratio_bytes(self) -> int | None:
        if self.max_ratio == float("inf"):
            return None
        return max(int(self.max_ratio * self.archive_size), RATIO_FLOOR)

    def add_member(self, name: str) -> None:
        self.members += 1
        self.last_member = name
        self.check_members(self.members, name)

    def check_members(self, count: int, name: str) -> None:
        if count > self.max_members:
            raise UnsafeArchiveError(
                f"unsafe archive {self.archive}: it has more than {self.max_members} members "
                f"(reached at {name!r}); refusing it as a possible decompression bomb. Nothing was "
                "extracted; do not trust this source."
            )

    def check_declared(self, size: int, name: str) -> None:
        """Fail early if a header already announces too much (headers can lie low, not high)."""
        self._check(self.written + max(size, 0), name, how="would bring")

    def add_written(self, size: int, name: str) -> None:
        self.written += size
        self._check(self.written, name, how="brought")

    def stream_limit(self) -> int:
        limits = [self.free_bytes]
        if self.max_bytes is not None:
            limits.append(self.max_bytes)
        if self.ratio_bytes is not None:
            limits.append(self.ratio_bytes)
        return min(limits) + (self.members + 1) * _TAR_OVERHEAD_PER_MEMBER + _TAR_OVERHEAD_FIXED

    def _check(self, total: int, name: str, *, how: str) -> None:
        if self.max_bytes is not None and total > self.max_bytes:
            raise UnsafeArchiveError(
                f"unsafe archive {self.archive}: member {name!r} {how} the uncompressed total to "
                f"{total} bytes, over the limit of {self.max_bytes} bytes; refusing it as a possible "
                "decompression bomb. Nothing was extracted; do not trust this source."
            )
        ratio_bytes = self.ratio_bytes
        if ratio_bytes is not None and total > ratio_bytes:
            raise UnsafeArchiveError(
                f"unsafe archive {self.archive}: member {name!r} {how} the uncompressed total to "
                f"{total} bytes, more than {self.max_ratio:g} times the {self.archive_size}-byte "
                "archive; refusing it as a possible decompression bomb. Nothing was extracted; "
                "do not trust this source."
            )
        if total > self.free_bytes:
            raise DiskFullError(
                f"not enough free space to extract {self.archive}: member {name!r} {how} it to "
                f"{total} bytes but only {self.free_bytes} bytes were free at {self.free_where}. "
                "Nothing was extracted; free some space and retry."
            )


class _GuardedStream:
    """A decompressed tar stream that refuses to grow past the budget and reports corruption.

    Decompression errors become ``IntegrityError``; read errors of the file itself
    (which carry an errno) become ``LocalFileError``.
    """

    def __init__(self, inner, *, budget: _Budget, archive: Path) -> None:
        self._inner = inner
        self._budget = budget
        self._archive = archive
        self._pos = 0

    def _guard(self, end: int) -> None:
        limit = self._budget.stream_limit()
        if end > limit:
            last = self._budget.last_member
            where = f"the member after {last!r}" if last else "its first member"
            raise UnsafeArchiveError(
                f"unsafe archive {self._archive}: {where} would take its tar stream past {limit} "
                f"bytes while its members so far hold only {self._budget.written} (oversized "
                "headers or padding); refusing it as a possible decompression bomb. Nothing was "
                "extracted."
            )

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = max(self._budget.stream_limit() - self._pos, 0) + 1
        else:
            self._guard(self._pos + size)  # before reading: a huge pax header is never allocated
        try:
            data = self._inner.read(size)
        except _DECOMPRESSION_ERRORS as exc:
            raise _read_error(self._archive, exc) from exc
        self._pos += len(data)
        self._guard(self._pos)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            offset += self._pos
        elif whence != os.SEEK_SET:
            raise OSError(errno.ESPIPE, "only forward seeks are supported")
        self._guard(offset)
        try:
            self._pos = self._inner.seek(offset)
        except _DECOMPRESSION_ERRORS as exc:
            raise _read_error(self._archive, exc) from exc
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True


# -- the extraction itself ----------------------------------------------------------
@dataclass
class _Extraction:
    """State of one extraction into ``root`` (the private temp dir)."""

    archive: Path
    root: Path
    budget: _Budget
    final_dir_mode: int
    dirs: set[tuple[str, ...]] = field(default_factory=set)
    regular: set[tuple[str, ...]] = field(default_factory=set)
    symlinks: list[tuple[tuple[str, ...], str]] = field(default_factory=list)

    def unsafe(self, name: str, why: str) -> UnsafeArchiveError:
        return UnsafeArchiveError(
            f"unsafe archive {self.archive}: member {name!r} {why}; refusing to extract it. "
            "Nothing was extracted; do not use this archive and check where it came from."
        )

    def split(self, name: str, *, member: str | None = None, what: str = "path") -> tuple[str, ...]:
        """Return the safe relative components of ``name`` (``()`` for the root itself).

        ``member`` is the member to name in errors when ``name`` is its link target.
        """
        member = name if member is None else member
        shown = "" if member == name else f" {name!r}"
        if "\0" in name:
            raise self.unsafe(member, f"has a NUL byte in its {what}")
        if name.startswith(("/", "\\")) or _DRIVE.match(name):
            raise self.unsafe(member, f"has an absolute {what}{shown}")
        parts = tuple(p for p in _SEPARATORS.split(name) if p not in ("", "."))
        if ".." in parts:
            raise self.unsafe(
                member, f"has a '..' component in its {what}{shown}, which would escape the target"
            )
        return parts

    def prepare(self, parts: tuple[str, ...], name: str, *, is_dir: bool) -> Path:
        """Create the parent dirs of ``parts`` and clear the way for it; never follow a link."""
        parent = self.root
        for depth, part in enumerate(parts[:-1], start=1):
            parent = parent / part
            rel = parts[:depth]
            if rel in self.dirs:
                continue
            try:
                st = os.lstat(parent)
            except FileNotFoundError:
                os.mkdir(parent, 0o777)
            else:
                if stat.S_ISLNK(st.st_mode):
                    raise self.unsafe(name, f"would be written through the symlink {'/'.join(rel)!r}")
                if not stat.S_ISDIR(st.st_mode):
                    raise self.unsafe(name, f"needs {'/'.join(rel)!r} to be a directory, but it is a file")
            self.dirs.add(rel)
        target = parent / parts[-1]
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            return target
        if stat.S_ISDIR(st.st_mode):
            if is_dir:
                return target
            raise self.unsafe(name, "would replace a directory of the same name")
        if is_dir:
            raise self.unsafe(name, "is a directory but an earlier member of the same name is a file or link")
        # A later member of the same name wins, as with tar; remove, never write through.
        os.unlink(target)
        self.regular.discard(parts)
        return target

    def make_dir(self, parts: tuple[str, ...], name: str) -> None:
        target = self.prepare(parts, name, is_dir=True)
        if not os.path.isdir(target):
            os.mkdir(target, 0o777)
        self.dirs.add(parts)

    def write_file(self, parts, name: str, src, *, size: int, mode: int | None, mtime: float | None) -> None:
        self.budget.check_declared(size, name)
        target = self.prepare(parts, name, is_dir=False)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY | _O_CLOEXEC
        fd = os.open(target, flags, 0o600 if mode is not None else 0o666)
        with os.fdopen(fd, "wb") as out:
            while True:
                chunk = _read_member(self.archive, name, src, CHUNK)
                if not chunk:
                    break
                self.budget.add_written(len(chunk), name)  # before the write: a bomb never lands
                out.write(chunk)
            if mode is not None:
                if hasattr(os, "fchmod"):
                    os.fchmod(out.fileno(), mode)
                else:  # pragma: no cover - Windows
                    os.chmod(target, mode)
        if mtime is not None:
            try:
                os.utime(target, (mtime, mtime))
            except (OverflowError, ValueError, OSError):
                pass  # a timestamp the filesystem cannot store is not worth failing for
        self.regular.add(parts)

    def check_symlink(self, parts: tuple[str, ...], name: str, linkname: str) -> None:
        if not linkname:
            raise self.unsafe(name, "is a symlink with an empty target")
        if "\0" in linkname:
            raise self.unsafe(name, "is a symlink whose target has a NUL byte")
        if linkname.startswith(("/", "\\")) or _DRIVE.match(linkname):
            raise self.unsafe(name, f"is a symlink to the absolute path {linkname!r}")
        stack = list(parts[:-1])
        for part in _SEPARATORS.split(linkname):
            if part in ("", "."):
                continue
            if part == "..":
                if not stack:
                    raise self.unsafe(name, f"is a symlink to {linkname!r}, outside the extraction directory")
                stack.pop()
            else:
                stack.append(part)
        self.check_inside(name, self.root.joinpath(*parts[:-1]) / linkname, linkname)

    def check_inside(self, name: str, path: Path, linkname: str) -> None:
        real = os.path.realpath(path)
        if os.path.commonpath([real, str(self.root)]) != str(self.root):
            raise self.unsafe(
                name, f"is a link to {linkname!r}, which resolves outside the extraction directory"
            )

    def make_symlink(self, parts: tuple[str, ...], name: str, linkname: str) -> None:
        self.check_symlink(parts, name, linkname)
        target = self.prepare(parts, name, is_dir=False)
        os.symlink(linkname, target)
        self.symlinks.append((parts, linkname))

    def make_hardlink(self, parts: tuple[str, ...], name: str, linkname: str) -> None:
        source_parts = self.split(linkname, member=name, what="hard link target")
        if source_parts not in self.regular:
            raise self.unsafe(
                name,
                f"is a hard link to {linkname!r}, which is not a regular file extracted earlier from this archive",
            )
        if source_parts == parts:
            raise self.unsafe(name, "is a hard link to itself")
        source = self.root.joinpath(*source_parts)
        self.check_inside(name, source, linkname)
        target = self.prepare(parts, name, is_dir=False)
        try:
            os.link(source, target, follow_symlinks=False)
        except OSError:
            # Filesystems without hard links (some FUSE/SMB mounts): copy, counting the bytes.
            size = os.path.getsize(source)
            with open(source, "rb") as src:
                self.write_file(parts, name, src, size=size, mode=None, mtime=None)
            shutil.copymode(source, target)
        self.regular.add(parts)

    def audit_symlinks(self) -> None:
        """Re-check every symlink now that all exist: a later link can change an earlier one's meaning."""
        for parts, linkname in self.symlinks:
            path = self.root.joinpath(*parts)
            if os.path.islink(path):
                self.check_inside("/".join(parts), path, linkname)


def _extract_tar(ctx: _Extraction, raw, compression: str) -> None:
    inner = _open_decompressor(raw, compression)
    stream = _GuardedStream(inner, budget=ctx.budget, archive=ctx.archive)
    try:
        with tarfile.open(fileobj=stream, mode="r:") as tar:
            while True:
                member = tar.next()
                if member is None:
                    break
                ctx.budget.add_member(member.name)
                _extract_tar_member(ctx, tar, member)
            _check_tar_end(ctx, stream, tar.offset)
        if inner is not raw:
            # Read the compressed stream to its end so gzip/bz2/xz check their own CRCs.
            while stream.read(_DRAIN_CHUNK):
                pass
    finally:
        if inner is not raw:
            inner.close()


def _check_tar_end(ctx: _Extraction, stream: _GuardedStream, offset: int) -> None:
    """tarfile stops quietly at a bad or missing header; a complete tar ends in zero blocks."""
    stream.seek(offset)
    tail = stream.read(2 * tarfile.BLOCKSIZE)
    if len(tail) < tarfile.BLOCKSIZE or tail.strip(b"\0"):
        raise IntegrityError(
            f"archive {ctx.archive} is truncated or corrupt: no valid tar header or end-of-archive "
            f"marker at offset {offset} of the tar stream. Nothing was extracted; delete it and "
            "download it again."
        )


def _extract_tar_member(ctx: _Extraction, tar: tarfile.TarFile, member: tarfile.TarInfo) -> None:
    name = member.name
    parts = ctx.split(name)
    if not (member.isreg() or member.isdir() or member.issym() or member.islnk()):
        kind = (
            "a character device"
            if member.ischr()
            else "a block device"
            if member.isblk()
            else "a FIFO"
            if member.isfifo()
            else f"of unsupported type {member.type!r}"
        )
        raise ctx.unsafe(name, f"is {kind}; only files, directories and links are extracted")
    if not parts:
        if member.isdir():
            return  # "./": the extraction root itself
        raise ctx.unsafe(name, "names the extraction directory itself but is not a directory")
    if member.issym():
        ctx.check_symlink(parts, name, member.linkname)
    if member.islnk():
        ctx.split(member.linkname, member=name, what="hard link target")
    mode = _data_mode(member.mode) if member.isreg() else None
    if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4: the stdlib's own checks too
        try:
            filtered = tarfile.data_filter(member, str(ctx.root))
        except tarfile.FilterError as exc:
            raise ctx.unsafe(name, f"was refused by tarfile's data filter ({exc})") from exc
        if member.isreg():
            mode = filtered.mode
    if member.isdir():
        ctx.make_dir(parts, name)
    elif member.issym():
        ctx.make_symlink(parts, name, member.linkname)
    elif member.islnk():
        ctx.make_hardlink(parts, name, member.linkname)
    else:
        src = tar.extractfile(member)
        ctx.write_file(parts, name, src, size=member.size, mode=mode, mtime=member.mtime)


def _extract_zip(ctx: _Extraction, raw) -> None:
    try:
        zf = zipfile.ZipFile(raw)
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:
        raise _corrupt(ctx.archive, exc) from exc
    with zf:
        infos = zf.infolist()
        ctx.budget.check_members(len(infos), infos[-1].filename if infos else "")
        declared = sum(info.file_size for info in infos if not info.filename.endswith(("/", "\\")))
        ctx.budget.check_declared(declared, "(all members together)")
        for info in infos:
            ctx.budget.add_member(info.filename)
            _extract_zip_member(ctx, zf, info)


def _extract_zip_member(ctx: _Extraction, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    if "\0" in info.orig_filename:
        raise ctx.unsafe(info.orig_filename, "has a NUL byte in its name")
    # Backslashes are separators in names written on Windows; treat them so everywhere.
    name = info.filename.replace("\\", "/")
    parts = ctx.split(name)
    unix_mode = info.external_attr >> 16
    kind = stat.S_IFMT(unix_mode)
    if name.endswith("/") or kind == stat.S_IFDIR:
        if parts:
            ctx.make_dir(parts, name)
        return
    if kind not in (0, stat.S_IFREG, stat.S_IFLNK):
        raise ctx.unsafe(name, "is a device, FIFO or socket; only files, directories and links are extracted")
    if not parts:
        raise ctx.unsafe(name, "names the extraction directory itself but is not a directory")
    if info.flag_bits & 0x1:
        raise IntegrityError(
            f"archive {ctx.archive}: member {name!r} is encrypted, which prefetch cannot extract. "
            "Nothing was extracted."
        )
    src = _open_zip_member(ctx, zf, info, name)
    with src:
        if kind == stat.S_IFLNK:
            if info.file_size > _MAX_LINK_TARGET:
                raise ctx.unsafe(name, f"is a symlink with a {info.file_size}-byte target")
            target = _read_member(ctx.archive, name, src, _MAX_LINK_TARGET + 1)
            ctx.make_symlink(parts, name, target.decode("utf-8", "surrogateescape"))
            return
        mode = _data_mode(unix_mode) if info.create_system == 3 and unix_mode & 0o777 else None
        mtime = _zip_mtime(info)
        ctx.write_file(parts, name, src, size=info.file_size, mode=mode, mtime=mtime)


def _open_zip_member(ctx: _Extraction, zf: zipfile.ZipFile, info: zipfile.ZipInfo, name: str):
    try:
        return zf.open(info)
    except NotImplementedError as exc:  # e.g. a compression method this Python lacks
        raise IntegrityError(
            f"archive {ctx.archive}: member {name!r} cannot be extracted: {exc}. Nothing was extracted."
        ) from exc
    except (zipfile.BadZipFile, EOFError, zlib.error, RuntimeError) as exc:
        raise _corrupt(ctx.archive, exc) from exc


def _zip_mtime(info: zipfile.ZipInfo) -> float | None:
    import time

    try:
        return time.mktime(info.date_time + (0, 0, -1))
    except (OverflowError, ValueError):
        return None


def _data_mode(mode: int) -> int:
    """tar's "data" filter: drop high bits and go-w, keep x only if the owner has it, owner rw."""
    mode &= 0o755
    if not mode & 0o100:
        mode &= ~0o111
    return mode | 0o600


def _read_member(archive: Path, name: str, src, size: int) -> bytes:
    try:
        return src.read(size)
    except PrefetchError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, NotImplementedError) as exc:
        raise _corrupt(archive, exc, member=name) from exc
    except _DECOMPRESSION_ERRORS as exc:
        raise _read_error(archive, exc, member=name) from exc


# -- errors ----------------------------------------------------------------------
def _corrupt(archive: Path, exc: BaseException, *, member: str | None = None) -> IntegrityError:
    where = f" (at member {member!r})" if member else ""
    return IntegrityError(
        f"archive {archive} is corrupt or truncated{where}: {exc or type(exc).__name__}. "
        "Nothing was extracted; delete it and download it again."
    )


def _read_error(archive: Path, exc: BaseException, *, member: str | None = None) -> PrefetchError:
    if isinstance(exc, OSError) and exc.errno is not None:
        return LocalFileError(f"cannot read archive {archive}: {exc.strerror}")
    return _corrupt(archive, exc, member=member)


def _filesystem_error(exc: OSError, *, archive: Path, destination: Path) -> PrefetchError:
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return DiskFullError(
            f"no space left while extracting {archive} into {destination}{where}; nothing was "
            "extracted. Free some space and retry."
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return LocalFileError(
            f"permission denied while extracting {archive} into {destination}{where}: "
            f"{exc.strerror}. Make the directory writable or choose another one."
        )
    return LocalFileError(f"cannot extract {archive} into {destination}{where}: {exc.strerror or exc}")


# -- placing the result ----------------------------------------------------------------
def _resolve_destination(destination: Path, *, archive: Path) -> Path:
    """Return where the contents go: ``destination``, or its target if it is a symlink to a dir."""
    if os.path.islink(destination) and os.path.isdir(destination):
        return Path(os.path.realpath(destination))
    if os.path.lexists(destination) and not os.path.isdir(destination):
        raise LocalFileError(
            f"cannot extract {archive} into {destination}: it exists and is not a directory; move it away or "
            "choose another destination."
        )
    return destination


def _staging_parent(final: Path) -> Path:
    """Where the temp dir goes: beside the target, or inside it if it is a mount point."""
    if os.path.isdir(final):
        parent = final.parent
        if os.stat(final).st_dev != os.stat(parent).st_dev:
            return final  # a rename from beside a mount point would cross filesystems
        return parent
    final.parent.mkdir(parents=True, exist_ok=True)
    return final.parent


def _make_temp_dir(parent: Path, name: str) -> tuple[Path, int]:
    """Create a private temp dir; return it and the mode a normal mkdir would have given it."""
    for _ in range(100):
        path = parent / f".{name}.extract-{secrets.token_hex(4)}"
        try:
            os.mkdir(path, 0o777)  # the umask decides the mode it keeps once renamed into place
        except FileExistsError:
            continue
        mode = stat.S_IMODE(os.stat(path).st_mode)
        os.chmod(path, 0o700)  # private while members are written into it
        return path, mode
    raise LocalFileError(f"cannot create a temporary directory in {parent}")  # pragma: no cover


def _install(temp: Path, final: Path) -> None:
    if not os.path.lexists(final):
        try:
            os.rename(temp, final)
            return
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            # Someone created it meanwhile: fall through and merge into it.
    for name in sorted(os.listdir(temp)):
        _replace_entry(temp / name, final / name)


def _replace_entry(new: Path, target: Path) -> None:
    """Put ``new`` at ``target`` so that ``target`` is always a complete old or new tree."""
    try:
        old = os.lstat(target)
    except FileNotFoundError:
        os.rename(new, target)
        return
    if not stat.S_ISDIR(old.st_mode) and not stat.S_ISDIR(os.lstat(new).st_mode):
        os.replace(new, target)  # one atomic step for files and links
        return
    aside = target.with_name(f".{target.name}.old-{secrets.token_hex(4)}")
    os.rename(target, aside)
    try:
        os.rename(new, target)
    except BaseException:
        os.rename(aside, target)
        raise
    remove_tree(aside)
