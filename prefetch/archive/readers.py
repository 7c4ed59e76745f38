"""Reading tar and zip archives member by member into an ``_Extraction``."""

from __future__ import annotations

import stat
import tarfile
import zipfile
import zlib

from prefetch.archive.format import _corrupt, _open_decompressor
from prefetch.archive.limits import _GuardedStream, check_zip_directory
from prefetch.archive.members import _Extraction, _data_mode, _read_member
from prefetch.archive.tar_count import count_members, worth_counting
from prefetch.errors import IntegrityError

_MAX_LINK_TARGET = 4096
_DRAIN_CHUNK = 64 << 10


def _extract_tar(ctx: _Extraction, raw, compression: str) -> None:
    inner = _open_decompressor(raw, compression)
    stream = _GuardedStream(inner, budget=ctx.budget, archive=ctx.archive)
    try:
        with tarfile.open(fileobj=stream, mode="r:") as tar:
            counted = False  # (the members counted ahead once, when the archive looks to hold many)
            while True:
                member = tar.next()
                if member is None:
                    break
                ctx.check_stop()
                ctx.budget.add_member(member.name)
                if not counted and ctx.budget.members & 1023 == 0:
                    counted = _count_ahead(ctx, raw, compression)
                _extract_tar_member(ctx, tar, member)
                tar.members.clear()  # (tarfile keeps every header read; nothing here looks one up again)
            _check_tar_end(ctx, stream, tar.offset)
        if inner is not raw:
            # Read the compressed stream to its end so gzip/bz2/xz check their own CRCs.
            while stream.read(_DRAIN_CHUNK):
                pass
    finally:
        if inner is not raw:
            inner.close()


def _count_ahead(ctx: _Extraction, raw, compression: str) -> bool:
    """When the members so far project more than half the limit: count the rest ahead
    (``tar_count.py``) and refuse now if the whole is past it. True once counted."""
    budget = ctx.budget
    if not worth_counting(budget.members, raw.tell(), budget.archive_size, budget.max_members):
        return False
    stop = ctx.stop.is_set if ctx.stop is not None else None
    # (no further than the extraction's own guard reads: past it, the extraction refuses anyway)
    total = count_members(raw.fileno(), compression, limit=budget.max_members, stop=stop,
                          max_bytes=budget.data_limit())
    if total is not None and total > budget.max_members:
        budget.check_members(total, f"a member after {budget.last_member!r}, counted ahead")
    return True


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
        if member.issparse() and ctx.verified:
            ctx.write_sparse(parts, name, src, size=member.size, sparse=member.sparse, mode=mode, mtime=member.mtime)
        else:
            ctx.write_file(parts, name, src, size=member.size, mode=mode, mtime=member.mtime)


def _extract_zip(ctx: _Extraction, raw) -> None:
    check_zip_directory(raw, ctx.budget)  # (before zipfile holds an object per entry)
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
            ctx.check_stop()
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

