"""Safe file operations for shared cache directories.

Keras falls back to ``/tmp/.keras`` and teams share group-writable caches, so another
local user can plant a symlink, a FIFO or a file at any name prefetch is about to use.
Every open, replace and removal of a prefetch path goes through here:

* opens use ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO never blocks, a final symlink is never
  followed), then ``fstat``: only regular files, and for files we write, only our own;
* an entry we are about to replace or remove is ``lstat``-ed first: a link, a
  non-regular file or an entry owned by another user is refused (``UnsafePathError``,
  exit 5, one line naming the path), never followed, truncated or deleted;
* temp files are created with ``O_EXCL`` (a planted name makes the create fail, it is
  never written through) and renamed into place relative to their directory's fd.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from prefetch.errors import UnsafePathError
import shutil

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
}


def as_path(value: str | os.PathLike) -> Path:
    """``value`` as a Path, the same object when it is one (a new Path parses the text again:
    per file of a list of thousands, that shows)."""
    return value if isinstance(value, Path) else Path(value)


def euid() -> int:
    """Our effective uid (-1 where the platform has none: then ownership is not checked)."""
    return os.geteuid() if hasattr(os, "geteuid") else -1


def kind_of(st: os.stat_result) -> str:
    """'a FIFO (named pipe)', 'a symbolic link', ... for messages."""
    return _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")


def refuse(path: Path | str, why: str) -> UnsafePathError:
    """The error for a prefetch path that holds something prefetch did not put there."""
    return UnsafePathError(
        f"refusing to use {path}: {why}, which prefetch did not create; it never writes through or "
        f"replaces such an entry. Remove it (or choose a private --cache-dir) and run the command again"
    )


def is_foreign(st: os.stat_result) -> bool:
    """Is ``st`` (an lstat) another user's entry?"""
    uid = euid()
    return uid >= 0 and st.st_uid != uid


def check_owned(path: Path | str, st: os.stat_result, *, what: str = "file") -> None:
    """Raise unless ``st`` (an lstat of ``path``) is a regular file (``what="file"``) or
    directory (``what="dir"``) owned by us."""
    want = stat.S_ISDIR if what == "dir" else stat.S_ISREG
    if not want(st.st_mode):
        raise refuse(path, f"it is {kind_of(st)}")
    if is_foreign(st):
        raise refuse(path, f"it belongs to another user (uid {st.st_uid})")


def lstat_or_none(path: Path | str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def check_replaceable(path: Path | str, *, what: str = "file") -> os.stat_result | None:
    """Before replacing or removing ``path``: None if absent, its lstat if it is ours.

    Raises:
        UnsafePathError: a link, a non-regular file or another user's entry is there.
    """
    st = lstat_or_none(path)
    if st is not None:
        check_owned(path, st, what=what)
    return st


def check_link_ok(path: Path | str) -> None:
    """A directory we are about to write into may be a symlink only if we or root made it.

    (The rule of Linux's ``fs.protected_symlinks``: a link another user planted in a
    shared directory is never followed.)
    """
    st = lstat_or_none(path)
    if st is not None and stat.S_ISLNK(st.st_mode) and st.st_uid not in (euid(), 0) and euid() >= 0:
        raise refuse(path, f"it is a symbolic link owned by another user (uid {st.st_uid})")


def check_dir_chain(path: Path | str, *, top: Path | str | None = None) -> None:
    """``check_link_ok`` for ``path`` and each parent down from ``top`` (default: the parent of ``path``)."""
    path = Path(os.path.abspath(path))
    top = Path(os.path.abspath(top)) if top is not None else path.parent
    chain = [path]
    if top in path.parents:
        for parent in path.parents:
            chain.append(parent)
            if parent == top:
                break
    for p in reversed(chain):
        check_link_ok(p)


def make_dirs(path: Path | str, *, mode: int = 0o777, made: list | None = None) -> Path:
    """``mkdir -p path``, never through a directory link another user planted anywhere above it.

    ``mode``: of each level created (the umask still applies), not only of the last one as
    ``mkdir -p`` does: ``0o755`` makes a folder nltk 3.10 reads whatever a group umask says.
    ``made``: the levels this call created (each ``mkdir`` that succeeded) are appended to it,
    the top one first (``fs/made_dirs.py`` takes away those a run left empty).

    Raises:
        UnsafePathError: a component of ``path`` is another user's symbolic link.
        OSError: a directory cannot be created.
    """
    path = Path(os.path.abspath(path))
    check_dir_chain(path, top=path.anchor)
    if mode == 0o777 and made is None:
        path.mkdir(parents=True, exist_ok=True)
        return path
    missing = []
    here = path
    while not os.path.lexists(here) and here.parent != here:
        missing.append(here)
        here = here.parent
    if not os.path.isdir(here):  # (a file, or a link to nothing: what mkdir -p fails on, EEXIST)
        if here != path and mode == 0o777:  # (under a file: ENOTDIR, as Path.mkdir(parents=True) says it)
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(missing[-1]))
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(here))
    for level in reversed(missing):
        try:
            os.mkdir(level, mode)
        except FileExistsError:
            if not os.path.isdir(level):
                raise
        else:
            if made is not None:
                made.append(level)
    return path



def open_file(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o644, *, own: bool = True) -> int:
    """Open ``path`` without following a final symlink and without blocking; regular files only.

    Args:
        flags: ``os.O_RDONLY``, ``os.O_RDWR | os.O_CREAT``, ...
        own: also require that we own the file (always for files we write).
    Raises:
        FileNotFoundError: it does not exist (and ``O_CREAT`` was not given).
        UnsafePathError: a symlink, FIFO, device, directory, or (``own``) another user's file.
        OSError: any other failure (permission, read-only...).
    """
    return open_file_stat(path, flags, mode, own=own)[0]


def keep_private(fd: int, st: os.stat_result) -> None:
    """Make the open file ``fd`` (``st``: its ``fstat``) its owner's alone (0600) when it is ours, has
    one name and others may read it; else leave it. A second name (a hard link planted beside our
    files: /etc/passwd, as root) is not a file of ours to change; a read-only disk leaves it as it is."""
    if st.st_mode & 0o077 and st.st_uid == os.geteuid() and st.st_nlink == 1:
        try:
            os.fchmod(fd, 0o600)
        except OSError:
            pass


def open_file_stat(path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o644, *,
                   own: bool = True) -> tuple[int, os.stat_result]:
    """:func:`open_file`, and the ``fstat`` of what it opened (its size, for one)."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | _NONBLOCK | _CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise refuse(path, "it is a symbolic link") from None
        if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EISDIR):
            st = lstat_or_none(path)
            raise refuse(path, f"it is {kind_of(st) if st else 'not a regular file'}") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refuse(path, f"it is {kind_of(st)}")
        if (own or flags & (os.O_WRONLY | os.O_RDWR)) and is_foreign(st):
            raise refuse(path, f"it belongs to another user (uid {st.st_uid})")
        if flags & (os.O_WRONLY | os.O_RDWR) and st.st_nlink > 1:
            # A name another user hard-linked to a file of ours they may write (0666): writing here
            # would write that file. Files prefetch writes in place (.part, logs) have one name.
            raise refuse(path, f"it is a hard link ({st.st_nlink} names for one file)")
        if _NONBLOCK:
            import fcntl

            # Blocking from now on. F_SETFL sets only the status flags (O_APPEND, O_NONBLOCK, ...)
            # and ignores the access mode and creation flags: the ones we opened with, less
            # O_NONBLOCK, are the flags to keep (no F_GETFL round trip).
            fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def open_readable(path: Path | str) -> int:
    """Open a user's file for reading, following links, never blocking: regular files only.

    (For files the user names or owns: configs, registries, a path given to ``verify``.)

    Raises:
        FileNotFoundError, OSError: as ``os.open``.
        UnsafePathError: a FIFO, device, socket or directory.
    """
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    except IsADirectoryError:
        raise refuse(path, "it is a directory") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refuse(path, f"it is {kind_of(st)}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(path: Path | str, *, limit: int = 64 << 20) -> bytes:
    """The bytes of a user's regular file (see ``open_readable``); FileNotFoundError if absent."""
    with os.fdopen(open_readable(path), "rb") as fh:
        return fh.read(limit)


def read_bytes(path: Path | str, *, own: bool = True, limit: int = 64 << 20) -> bytes | None:
    """The contents of a small regular file, or None when it does not exist.

    Raises:
        UnsafePathError: not a regular file (never blocks on a FIFO), or another user's (``own``).
        OSError: unreadable.
    """
    try:
        fd = open_file(path, os.O_RDONLY, own=own)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit)


def write_new(path: Path | str, data: bytes = b"", *, mode: int = 0o644, durable: bool = False) -> None:
    """Create ``path`` (which must not exist: ``O_EXCL``) holding ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode)
    try:  # os.write, not a buffered file object: no isatty probe, no buffer, for a few hundred bytes
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def replace(source: Path | str, target: Path | str) -> None:
    """Rename our ``source`` over ``target`` in one step; ``target`` must be absent or ours.

    A rename never writes through a link at ``target`` (it replaces the name), but a
    link or another user's entry at ``target`` is still refused: it is not ours to drop.
    Both names must be in the same directory; the rename is relative to its fd.
    """
    source = as_path(source)
    target = as_path(target)
    check_replaceable(target)
    # (the normalized strings split: pathlib's parent and name cost a file more than the rename)
    folder, source_name = os.path.split(str(source))
    target_folder, target_name = os.path.split(str(target))
    if folder == target_folder and _DIRECTORY:
        dfd = os.open(folder or ".", os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            os.replace(source_name, target_name, src_dir_fd=dfd, dst_dir_fd=dfd)
        finally:
            os.close(dfd)
    else:
        os.replace(source, target)


def remove_own(path: Path | str) -> bool:
    """Remove ``path`` (file, link or tree) if it is ours; leave another user's entry alone.

    Returns True when something was removed. A symlink is removed itself, never followed.
    """
    st = lstat_or_none(path)
    if st is None or is_foreign(st):
        return False
    remove_tree(Path(path))
    return True


def discard_own(path: Path | str) -> None:
    """``remove_own`` on an error path (a temp file being dropped): an OSError is ignored, as the
    error already being raised is the one to report."""
    try:
        remove_own(path)
    except OSError:
        pass


def private_dir(path: Path) -> Path:
    """Create (0700) or check a directory only we may use; returns ``path``.

    Raises:
        UnsafePathError: it is a link, not a directory, or another user's.
        OSError: it cannot be created.
    """
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    check_owned(path, st, what="dir")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def remove_tree(path: Path) -> None:
    """Delete ``path`` (file, link or tree) as thoroughly as possible, never raising."""
    try:
        if os.path.islink(path) or not os.path.isdir(path):
            os.unlink(path)
            return
    except FileNotFoundError:
        return
    except OSError:
        return
    try:
        shutil.rmtree(path)
    except OSError:
        # Read-only directories (from an old extraction) block deletion of their entries.
        for dirpath, dirnames, _ in os.walk(path):
            for d in dirnames:
                full = os.path.join(dirpath, d)
                if not os.path.islink(full):
                    try:
                        os.chmod(full, 0o700)
                    except OSError:
                        pass
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
        shutil.rmtree(path, ignore_errors=True)
