"""Many targets' locks in one file: a byte-range lock per target, no new inode per target.

A lock file per target cost a new inode per downloaded file (issue 19: on ext4 after many
deletions, ~0.3-1 ms of kernel time each, as much as the file's own ``.part``) and about ten
system calls. Here every target of a locks dir is one byte of one shared file (``NAME``),
locked with Linux's open-file-description locks (``F_OFD_SETLK``, Linux >= 3.15): the byte
at an offset from the target's path hash (62 bits: two targets never share one by chance).

* The file is opened once per process and locks dir (an open file description of its own:
  a forked child opens its own, so parent and child exclude each other). OFD locks belong to
  that description, not to a thread, so threads of this process are kept apart by a table
  of the bytes this process holds; other processes by the kernel, which drops a dead
  holder's locks (never stale), as it does ``flock``'s.
* Who holds a lock: the holder writes a small record at a slot of the same file (the hash
  modulo ``RECORDS``; the record names its target's key, so a slot two targets share by
  chance is read as "another process", never as the wrong owner) and zeroes it on release.
* Another user's shared file is never written (``safefs``' rule): a process that can only
  read it takes a *read* lock on the byte, which excludes every writer of it, and the
  per-target lock file as before (``lock_files._FileLock``), which excludes the other readers.
"""

from __future__ import annotations

import errno
import os
import struct
import sys
import threading
import time
from pathlib import Path

try:
    import fcntl

    _SETLK, _GETLK = fcntl.F_OFD_SETLK, fcntl.F_OFD_GETLK
except (ImportError, AttributeError):  # pragma: no cover - not Linux, or Python without OFD locks
    fcntl = None  # type: ignore[assignment]

AVAILABLE = fcntl is not None and sys.platform.startswith("linux") and sys.maxsize > 2**32
NAME = "targets.lock"
RECORD = 256  # bytes of one owner record
RECORDS = 1 << 14  # record slots: the file's data is at most 4 MiB (sparse), whatever the number of targets
_FLOCK = struct.Struct("hhqqi4x")  # struct flock on 64-bit Linux: type, whence, start, len, pid
_RECHECK = 1.0  # seconds between checks that the shared file is still the one at its name
_CACHED = 8  # locks dirs whose file stays open (a test session makes hundreds)


def offsets(key: str) -> tuple[int, int]:
    """(the locked byte, the owner record's offset) for a target's key (its hash, hex)."""
    n = int(key[:16], 16)
    return (n >> 2) + 1, (n % RECORDS) * RECORD


class _Shared:
    """A locks dir's shared file as this process holds it open."""

    __slots__ = ("fd", "writable", "ident", "checked", "users")

    def __init__(self, fd: int, writable: bool, ident: tuple[int, int], checked: float) -> None:
        self.fd = fd
        self.writable = writable  # False: another user's file, read locks only
        self.ident = ident  # (st_dev, st_ino) when opened: a file replaced at the name is noticed
        self.checked = checked  # when ident was last compared with the name's
        self.users = 0  # RangeLocks using it now (only an unused one is ever closed)


class _Process:
    """This process's open shared files and the bytes its threads hold (a child starts afresh)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.mutex = threading.Lock()
        self.files: dict[str, _Shared] = {}  # locks dir -> its shared file, open
        self.held: set[tuple[str, int]] = set()


_proc = _Process()


def pid() -> int:
    """This process's id (no system call per lock)."""
    return _proc.pid


def _after_fork() -> None:
    global _proc
    old, _proc = _proc, _Process()
    for entry in old.files.values():  # (the parent's descriptions: never unlocked from here)
        try:
            os.close(entry.fd)
        except OSError:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _open(locks_dir: Path) -> _Shared:
    """The shared file's entry for ``locks_dir`` (opened, or created, once per process), counted
    as used until the caller's ``_done``: only an unused entry is ever closed.

    Raises:
        FileNotFoundError: no ``locks_dir`` yet. UnsafePathError: a link or FIFO at its name.
    """
    key = str(locks_dir)
    proc = _proc
    with proc.mutex:
        entry = proc.files.get(key)
        now = time.monotonic()
        if entry is not None and now - entry.checked >= _RECHECK:
            try:  # replaced or deleted since (a state dir cleaned while we run): use the new one
                st = os.stat(os.path.join(key, NAME), follow_symlinks=False)
                if (st.st_dev, st.st_ino) == entry.ident:
                    entry.checked = now
                else:
                    entry = None
            except OSError:
                entry = None
        if entry is None:
            entry = _new_entry(proc, key, now)
        entry.users += 1
        return entry


def _new_entry(proc: _Process, key: str, now: float) -> _Shared:
    from prefetch.errors import UnsafePathError
    from prefetch.fs.safefs import open_file_stat

    path = os.path.join(key, NAME)
    try:
        fd, st = open_file_stat(path, os.O_RDWR | os.O_CREAT, 0o644, own=False)
        writable = True
    except (PermissionError, UnsafePathError) as exc:  # another user's file: read-only (a read lock)
        if isinstance(exc, UnsafePathError) and "another user" not in str(exc):
            raise
        fd, st = open_file_stat(path, os.O_RDONLY, own=False)
        writable = False
    old = proc.files.pop(key, None)
    if old is not None and not old.users:
        os.close(old.fd)  # (one still in use is closed by its last user: _done)
    entry = proc.files[key] = _Shared(fd, writable, (st.st_dev, st.st_ino), now)
    idle = [k for k, e in proc.files.items() if k != key and not e.users]
    for other in idle[:max(0, len(proc.files) - _CACHED)]:
        os.close(proc.files.pop(other).fd)
    return entry


def _done(proc: _Process, key: str, entry: _Shared) -> None:
    """One user of ``entry`` less (with ``proc.mutex`` held)."""
    entry.users -= 1
    if entry.users == 0 and proc.files.get(key) is not entry:
        os.close(entry.fd)  # (replaced while in use)


class RangeLock:
    """One target's byte in its locks dir's shared file (see the module docstring)."""

    def __init__(self, locks_dir: Path, key: str) -> None:
        self.dir = str(locks_dir)
        self.proc = _proc
        self.entry = _open(locks_dir)
        self.writable: bool = self.entry.writable
        self.byte, self.record = offsets(key)
        self.held = False
        self.wrote = False
        self.open = True

    def try_acquire(self) -> bool:
        proc, mine = self.proc, (self.dir, self.byte)
        with proc.mutex:
            if mine in proc.held:  # another thread of this process has it
                return False
            kind = fcntl.F_WRLCK if self.writable else fcntl.F_RDLCK
            try:
                fcntl.fcntl(self.entry.fd, _SETLK, _FLOCK.pack(kind, os.SEEK_SET, self.byte, 1, 0))
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    return False
                raise
            proc.held.add(mine)
            self.held = True
        return True

    def write_owner(self, data: bytes) -> bool:
        """Record the holder at this target's record slot; False when it cannot be written here."""
        if not self.writable or len(data) >= RECORD:
            return False
        os.pwrite(self.entry.fd, data + b"\0" * (RECORD - len(data)), self.record)
        self.wrote = True
        return True

    def unlock(self) -> None:
        """Let the byte go (the lock can be taken again)."""
        proc = self.proc
        with proc.mutex:
            self._unlock(proc)

    def _unlock(self, proc: _Process) -> None:
        if self.held:
            self.held = False
            proc.held.discard((self.dir, self.byte))
            fcntl.fcntl(self.entry.fd, _SETLK, _FLOCK.pack(fcntl.F_UNLCK, os.SEEK_SET, self.byte, 1, 0))

    def close(self) -> None:
        """Release the lock (its owner record zeroed first, while still held) and the file."""
        proc = self.proc
        if not self.open or proc is not _proc:  # (closed already, or a forked child's copy: the parent's)
            return
        self.open = False
        if self.wrote:
            try:
                os.pwrite(self.entry.fd, bytes(RECORD), self.record)
            except OSError:
                pass
        with proc.mutex:
            try:
                self._unlock(proc)
            finally:
                _done(proc, self.dir, self.entry)


def read_record(locks_dir: Path, key: str) -> bytes | None:
    """The owner record for ``key``, if the slot holds one of this key."""
    from prefetch.fs.safefs import open_file

    try:
        fd = open_file(os.path.join(locks_dir, NAME), os.O_RDONLY, own=False)
    except OSError:
        return None
    try:
        raw = os.pread(fd, RECORD, offsets(key)[1]).rstrip(b"\0")
    finally:
        os.close(fd)
    return raw or None


def is_held(locks_dir: Path, key: str) -> bool:
    """True while any process (this one too) holds ``key``'s byte; creates nothing."""
    try:
        fd = os.open(os.path.join(locks_dir, NAME), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        byte = offsets(key)[0]
        got = fcntl.fcntl(fd, _GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0))
        return _FLOCK.unpack(got)[0] != fcntl.F_UNLCK
    except OSError:
        return False
    finally:
        os.close(fd)
