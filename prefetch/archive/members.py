"""One extraction into a private temp dir: member names, links and modes checked, files written."""

from __future__ import annotations

import os
import re
import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from prefetch.archive.format import _DECOMPRESSION_ERRORS, _corrupt, _read_error
from prefetch.archive.limits import _Budget
from prefetch.errors import InterruptedTransferError, PrefetchError, UnsafeArchiveError

CHUNK = 1 << 20
_SEPARATORS = re.compile(r"[/\\]")
_DRIVE = re.compile(r"^[A-Za-z]:")
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass
class _Extraction:
    """State of one extraction into ``root`` (the private temp dir)."""

    archive: Path
    root: Path
    budget: _Budget
    final_dir_mode: int
    verified: bool = False  # the archive matched its expected hash (sparse members keep their holes)
    dirs: set[tuple[str, ...]] = field(default_factory=set)
    regular: set[tuple[str, ...]] = field(default_factory=set)
    symlinks: list[tuple[tuple[str, ...], str]] = field(default_factory=list)
    stop: object = None  # a threading.Event: set (Ctrl-C, `prefetch cancel`), the extraction ends

    def check_stop(self) -> None:
        """Between members and chunks: a stop ends the extraction (the caller removes its temp dir)."""
        if self.stop is not None and self.stop.is_set():
            raise InterruptedTransferError(f"extracting {self.archive} stopped; nothing of it was placed")

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
                self.check_stop()
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

    def write_sparse(self, parts, name: str, src, *, size: int, sparse, mode: int | None,
                     mtime: float | None) -> None:
        """A sparse tar member of a verified archive: its data blocks written where they belong,
        its holes left as holes. Only the data counts for the ratio; the full size still counts
        for ``max_bytes`` and the free space."""
        blocks = [(int(off), int(n)) for off, n in sparse if n > 0]
        stored = sum(n for _, n in blocks)
        if any(off < 0 or off + n > size for off, n in blocks) or size < 0:
            raise self.unsafe(name, "is a sparse file whose map points outside its size")
        self.budget.check_declared(stored, name)
        self.budget.add_holes(size - stored, name)
        target = self.prepare(parts, name, is_dir=False)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_BINARY | _O_CLOEXEC
        fd = os.open(target, flags, 0o600 if mode is not None else 0o666)
        with os.fdopen(fd, "wb") as out:
            for offset, length in blocks:
                src.seek(offset)
                out.seek(offset)
                left = length
                while left:
                    chunk = _read_member(self.archive, name, src, min(CHUNK, left))
                    if not chunk:
                        break
                    self.budget.add_written(len(chunk), name)
                    out.write(chunk)
                    left -= len(chunk)
            out.truncate(size)
            if mode is not None:
                os.fchmod(out.fileno(), mode)
        if mtime is not None:
            try:
                os.utime(target, (mtime, mtime))
            except (OverflowError, ValueError, OSError):
                pass
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

    def audit_tree(self, top: Path) -> None:
        """Check every symlink under ``top`` (what will be placed) where it is now: a move
        (``rearrange``) takes a relative link to another depth, where ``../x`` points elsewhere,
        and of a subfolder only its contents are placed, so ``sub/link -> ../x`` would leave it."""
        if not self.symlinks:
            return
        top = Path(os.path.realpath(top))
        for here, dirs, files in os.walk(top):
            for name in (*dirs, *files):
                path = Path(here) / name
                if not os.path.islink(path):
                    continue
                real = os.path.realpath(path)
                if os.path.commonpath([real, str(top)]) != str(top):
                    raise self.unsafe(str(path.relative_to(self.root)),
                                      f"is a link to {os.readlink(path)!r}, which resolves outside "
                                      + ("the extraction directory" if top == self.root else "the folder extracted"))



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

