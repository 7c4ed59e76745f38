"""Small filesystem helpers shared by every module that writes files."""

from __future__ import annotations

import errno
import os
from pathlib import Path


def replace_file(path: Path, data: bytes, *, durable: bool = False, mode: int | None = None,
                 checked: bool = False) -> None:
    """Replace ``path`` with ``data`` in one step: a temp file beside it, then ``os.replace``.

    Readers see the old content or the new, never a half-written file. The temp file is
    created with ``O_EXCL | O_NOFOLLOW``: a name planted there is never written through.

    Args:
        durable: fsync the data before the rename (records that must survive a crash).
        mode: permission bits for the new file (default: the umask's).
        checked: ``path`` is a prefetch path in a possibly shared directory: refuse
            (``UnsafePathError``) a link, non-regular file or another user's file there.
    Raises:
        OSError: the temp file could not be written or renamed (it is removed).
        UnsafePathError: with ``checked``, something prefetch did not create is at ``path``.
    """
    from prefetch.fs import safefs

    path = Path(path)
    tmp = temp_name(path)
    if checked:
        safefs.check_replaceable(path)
    try:
        safefs.write_new(tmp, data, durable=durable, mode=0o666 if mode is None else 0o600)
        if mode is not None:
            os.chmod(tmp, mode)
        if checked:
            safefs.replace(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException:
        try:
            st = os.lstat(tmp)
            if not safefs.is_foreign(st):
                tmp.unlink()
        except OSError:
            pass
        raise



def temp_name(path: Path) -> Path:
    """A new temp name beside ``path``: ``.<name>.<pid>-<host tag><random>.tmp``. The host tag
    (8 hex digits of this machine's name) lets :func:`remove_dead_temps` judge a pid only
    where it means something: on a folder shared between machines (NFS, a team's export
    dir), another machine's live writer has a pid that is not running here."""
    return path.with_name(f".{path.name}.{os.getpid()}-{_host_tag()}{os.urandom(4).hex()}.tmp")


def _host_tag() -> str:
    """8 hex digits of this machine's name (FNV-1a: no module imported for it)."""
    if not _HOST:
        h = 0x811C9DC5
        for byte in os.uname().nodename.encode("utf-8", "replace"):
            h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
        _HOST.append(f"{h:08x}")
    return _HOST[0]


_HOST: list[str] = []


def remove_dead_temps(path: Path) -> list[Path]:
    """Remove the temp files ``replace_file`` left beside ``path`` when its writer was killed.

    A temp file is ``.<name>.<pid>-<hex>.tmp`` (:func:`temp_name`); one this machine made
    whose pid is no longer running (a SIGKILL between write and rename) is removed. Another
    machine's (its host tag), another user's file and a live writer's are left alone; a name
    of the older form without a tag (8 hex digits) is judged by its pid alone, as before.
    Returns what was removed.
    """
    import re

    from prefetch.fs import safefs
    from prefetch.fs.processes import is_process_alive

    path = Path(path)
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.(\d+)-([0-9a-f]+)\.tmp$")
    removed = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    for name in names:
        match = pattern.match(name)
        if not match or (len(match[2]) != 8 and not match[2].startswith(_host_tag())):
            continue  # (not a temp of ours, or another machine's)
        if not is_process_alive(int(match[1])) and safefs.remove_own(path.parent / name):
            removed.append(path.parent / name)
    return removed


def mib(n: int | None) -> str:
    """Bytes as MiB for messages: 3145728 -> '3.0 MiB'."""
    return "? MiB" if n is None else f"{n / (1 << 20):.1f} MiB"


def free_space(path: Path) -> int:
    """Bytes free for us on the filesystem holding ``path`` (or its nearest existing parent)."""
    for candidate in (path, *path.parents):
        try:
            st = os.statvfs(candidate)
            return st.f_bavail * st.f_frsize
        except OSError:
            continue
    return 0


# What a download's user can point elsewhere: `-P /kaggle/input` (read-only) is a URL's folder, not a cache dir.
TARGET_OPTIONS = "folder (-P DIR or -o PATH for a URL, --cache-dir for a dataset or model)"


def local_error(exc: OSError, path: Path, *, needed: int | None = None, instead: str = TARGET_OPTIONS):
    """The user-facing error for an OSError while writing ``path``; ``instead``: what the user
    can point elsewhere (``PREFETCH_HOME`` for prefetch's own state; by default the options
    that choose where a download goes).

    Returns:
        DiskFullError (no space, with free and needed sizes) or LocalFileError.
    """
    from prefetch.errors import DiskFullError, LocalFileError

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        need = f"; needs {_amount(needed)} more" if needed else ""
        return DiskFullError(
            f"no space left on the device holding {path}{need}, {_amount(free_space(path))} free. "
            f"Free some space (or use another {instead}) and run the command again to resume"
        )
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        from prefetch.errors import too_many_open_files

        return too_many_open_files(str(path))
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return LocalFileError(f"cannot write {path}: {exc.strerror}; choose a writable {instead}")
    return LocalFileError(f"cannot write {path}: {exc.strerror or exc}")


def overwrite_in_place(path: Path, data: bytes) -> bool:
    """Write ``data`` over the bytes of ``path`` itself, for when a full disk refuses the new file of
    ``replace_file``: True when done.

    Only when ``data`` fits in the file's current size: padded with spaces to exactly that size
    (JSON readers skip them), in one ``pwrite``: the file's size and blocks stay as they are, so
    no block is allocated. False (nothing written) when it does not fit, cannot be opened as our
    own regular file, or the write is refused (a copy-on-write filesystem may need a block).
    """
    from prefetch.errors import UnsafePathError
    from prefetch.fs import safefs

    try:
        fd, st = safefs.open_file_stat(path, os.O_WRONLY)
    except (OSError, UnsafePathError):
        return False
    try:
        if len(data) > st.st_size:
            return False
        data += b" " * (st.st_size - len(data))
        written = 0
        while written < len(data):  # (over allocated blocks a write is whole; a short one is still finished)
            written += os.pwrite(fd, data[written:], written) or _no_progress()
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _no_progress() -> int:
    raise OSError(errno.EIO, "a write made no progress")


def _amount(n: int) -> str:
    """Bytes for a disk-full message: MiB, or KiB below one (a small file's '0.0 MiB' said nothing)."""
    return mib(n) if n >= 1 << 20 else f"{n / 1024:.1f} KiB"


_SYNCFS: list = []  # [libc's syncfs or None], looked up once


_RENAMEAT2: list = []  # [libc's renameat2 or None], looked up once
_NOREPLACE = 1  # RENAME_NOREPLACE


def rename_new(name: str, new: str, dir_fd: int) -> bool | None:
    """Rename ``name`` to ``new``, both in the folder ``dir_fd``, only if nothing is at ``new``
    (``renameat2`` with ``RENAME_NOREPLACE``: one call where a look and a rename took two, and
    nothing can come between them): True when renamed, False when something is at ``new``
    (nothing renamed), None where libc, the kernel or the filesystem cannot (nothing renamed).

    Raises:
        OSError: the rename failed otherwise (``name`` gone, no room, ...).
    """
    if not _RENAMEAT2:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _RENAMEAT2.append((libc.renameat2, ctypes.get_errno) if hasattr(libc, "renameat2") else None)
        except (OSError, AttributeError):
            _RENAMEAT2.append(None)
    if _RENAMEAT2[0] is None:
        return None
    call, get_errno = _RENAMEAT2[0]
    if call(dir_fd, os.fsencode(name), dir_fd, os.fsencode(new), _NOREPLACE) == 0:
        return True
    code = get_errno()
    if code == errno.EEXIST:
        return False
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EPERM):  # (a filesystem without the flag, a
        return None  # seccomp filter that refuses the call: the look-then-rename way)
    raise OSError(code, os.strerror(code), new)


def syncfs_call():
    """libc's ``syncfs`` (flush one filesystem), or None where it is missing."""
    if not _SYNCFS:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            _SYNCFS.append(libc.syncfs if hasattr(libc, "syncfs") else None)
        except (OSError, AttributeError):
            _SYNCFS.append(None)
    return _SYNCFS[0]


def flush_filesystem(folder: Path) -> None:
    """Put what was written under ``folder`` on disk: ``syncfs`` of its filesystem (one call for a
    tree of any size), else ``os.sync``. For a tree renamed into place once complete: after a
    machine crash it holds its bytes, not empty files."""
    call = syncfs_call()
    if call is not None:
        try:
            fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            fd = None
        if fd is not None:
            try:
                if call(fd) == 0:
                    return
            finally:
                os.close(fd)
    os.sync()


def sync_dir(directory: Path) -> None:
    """fsync ``directory`` itself: the names created or renamed in it survive a machine crash, not
    only the bytes of its files (best effort: some filesystems refuse a directory's fsync)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
