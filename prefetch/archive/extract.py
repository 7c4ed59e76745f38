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
where the running Python has it, then a final audit of every symlink created, and again
where it ends up after the tree's rearrangements, which move links to another depth, and
inside the subfolder when only its contents are placed):

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

import os
import shutil
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from prefetch.archive.format import _check_format, _corrupt, _filesystem_error, _open_archive, _sniff
from prefetch.archive.limits import _Budget
from prefetch.archive.members import _Extraction
from prefetch.archive.place import _install, _make_temp_dir, _resolve_destination, _set_dir_mode, _staging_parent
from prefetch.archive.readers import _extract_tar, _extract_zip
from prefetch.errors import UsageError
from prefetch.fs.safefs import remove_tree

FORMATS = ("auto", "tar", "zip")


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
    protect: Iterable[Path] = (),
    verified: bool = False,
    moves: Sequence[tuple[str, str]] = (),
    gunzip: str | None = None,
    merge: bool = False,
    subfolder: str = "",
    top: str = "",
    stop=None,
    durable: bool = False,
    private: bool = False,
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
        protect: paths no member may replace (the archive, its partial and state, other
            names of the same file); members named like prefetch's in-flight files
            (``*.part``, ``*.part.json``, its temp names) are refused too.
        verified: the archive matched an expected hash: sparse tar members are then
            written as sparse files, their holes exempt from ``max_ratio`` (their full
            size still counts against ``max_bytes`` and the free space).
        moves, gunzip: rearrangements of the extracted tree before it is placed
            (``archive/rearrange.py``): paths moved, a folder of .gz files decompressed.
        merge: directories already in ``destination`` are merged into, as tar and zip
            extraction do (files of the same name replaced, others kept), instead of
            replaced whole.
        subfolder: a folder of the (rearranged) tree, ``"MiddEval3/testF"``: only its
            contents go into ``destination``, the rest is dropped (every member is still
            checked); ``IntegrityError`` when the archive has no such folder.
        top: the one top-level folder the archive may have (an NLTK package's own ``<id>/``,
            as nltk's downloader requires): a member outside it is ``UnsafeArchiveError``,
            so one package never replaces another's files.
        private: no group or world write bit on anything placed, whatever the umask and the
            archive's modes (nltk 3.10 refuses to read data another account could write).
        durable: flush the extracted tree to disk (``syncfs``) before it is renamed into place,
            so that after a machine crash a placed tree holds its bytes.
        stop: a ``threading.Event``; once set, the extraction ends before its next member or
            MiB (``InterruptedTransferError``), nothing placed.

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
        protected = frozenset(_norm(Path(p)) for p in (archive, *protect))
        if _norm(final) in protected:
            raise UsageError(f"cannot extract {archive} into {destination}: that is the archive's own path")
        temp: Path | None = None
        try:
            staging = _staging_parent(final)
            temp, temp_mode = _make_temp_dir(staging, final.name)
            ctx = _Extraction(
                archive=archive,
                root=Path(os.path.realpath(temp)),
                final_dir_mode=temp_mode,
                verified=verified,
                stop=stop,
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
            if moves or gunzip:
                from prefetch.archive.rearrange import rearrange

                rearrange(temp, archive=archive, moves=moves, gunzip=gunzip, stop=stop)
            if top:
                outside = sorted(e for e in os.listdir(temp) if e != top)
                if outside:
                    raise ctx.unsafe(outside[0], f"is outside the folder {top!r} every member must lie in "
                                                 "(it would replace another package's files)")
            source = _subfolder(temp, subfolder, archive) if subfolder else temp
            if moves or gunzip or subfolder:
                ctx.audit_tree(source)  # a moved link, or one out of the subfolder, may point outside
            entries = sorted(os.listdir(source))
            if private:
                _no_group_write(source)
            _set_dir_mode(source, ctx.final_dir_mode & ~0o022 if private else ctx.final_dir_mode)
            if durable:
                from prefetch.fs.files import flush_filesystem

                flush_filesystem(temp)
            _install(source, final, archive=archive, protect=protected, merge=merge)
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




def _no_group_write(top: Path) -> None:
    """Clear the group and world write bits of every folder and file under ``top`` (our own
    0700 temp tree: nothing else can swap an entry; links are left alone, never followed)."""
    import stat

    for here, dirs, files in os.walk(top):
        for name in dirs + files:
            path = os.path.join(here, name)
            st = os.lstat(path)
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022:
                os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o022)


def _subfolder(temp: Path, subfolder: str, archive: Path) -> Path:
    """``temp/subfolder``, each step a real directory the archive made (no link followed)."""
    import stat

    from prefetch.errors import IntegrityError

    here = temp
    for part in subfolder.replace("\\", "/").split("/"):
        if part in ("", ".", ".."):
            raise UsageError(f"subfolder {subfolder!r} must be a relative path inside the archive")
        here = here / part
        try:
            is_dir = stat.S_ISDIR(os.lstat(here).st_mode)
        except FileNotFoundError:
            is_dir = False
        if not is_dir:
            raise IntegrityError(f"{archive} has no folder {subfolder!r} (the layout expects its contents); "
                                 "nothing was extracted")
    return here


def _norm(path: Path) -> Path:
    """``path`` with its parent resolved (links followed) but not its last component."""
    path = Path(os.path.abspath(path))
    return Path(os.path.realpath(path.parent)) / path.name
