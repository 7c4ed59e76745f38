"""A host's connection slots, shared by this user's processes: one byte-range lock per slot.

One empty file per host under the state dir's ``slots/`` (``open_slots``). A connection holds
one of its bytes ``[0, cap)`` with a Linux open-file-description lock (``F_OFD_SETLK``, a
write lock on one byte, never waited for); the lock goes when it is given back or when the
process dies and the kernel closes its descriptors: no stale state, nothing to clean up.
Two marks beyond the slots are *read* locks, which any number of processes hold at once and
any other process can see with ``F_OFD_GETLK``: ``WAITING`` (a process that has no slot and
wants its first connection) and ``EXTRAS`` (a process holding more than one slot).

Nothing is ever written to the file (its data stays empty): it is created ``0600`` with
``O_NOFOLLOW`` in a directory we made, and a link, FIFO or another user's file at its name
is refused (``safefs``), as is a system without OFD locks: ``open_slots`` returns None
and the caller goes on without sharing.
"""

from __future__ import annotations

import errno
import os
import re
import struct
import sys
import weakref

try:
    import fcntl

    _SETLK, _GETLK = fcntl.F_OFD_SETLK, fcntl.F_OFD_GETLK
except (ImportError, AttributeError):  # pragma: no cover - not Linux, or Python without OFD locks
    fcntl = None  # type: ignore[assignment]

AVAILABLE = fcntl is not None and sys.platform.startswith("linux") and sys.maxsize > 2**32
_FLOCK = struct.Struct("hhqqi4x")  # struct flock on 64-bit Linux: type, whence, start, len, pid
WAITING = 1 << 30  # the byte a process without a slot read-locks while it waits for its first
EXTRAS = WAITING + 1  # the byte every process holding more than one slot read-locks


def slot_file_name(host: str) -> str:
    """The slot file's name for a host key (``http://example.org:80`` -> ``http-example.org-80``)."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", host).strip("-")[:200] or "host"


class SlotFile:
    """One host's slot file, open once in this process (an open file description of its own).

    OFD locks belong to the description, not to a thread: the caller keeps the table of the
    bytes this process holds (a byte it holds already would be granted again) and calls under
    its own lock.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        _open_files.add(self)

    def take(self, *, cap: int, skip) -> int | None:
        """Lock a free slot in ``[0, cap)`` not in ``skip`` (this process's own); None: all taken.

        One system call when the lowest slot not held here is free (one process alone).
        """
        for index in range(cap):
            if index not in skip and self._lock(fcntl.F_WRLCK, index):
                return index
        return None

    def give(self, index: int) -> None:
        """Let slot ``index`` go."""
        self._lock(fcntl.F_UNLCK, index)

    def mark(self, byte: int, on: bool) -> None:
        """Hold (``on``) or drop this process's read lock on a mark byte (``WAITING``, ``EXTRAS``)."""
        self._lock(fcntl.F_RDLCK if on else fcntl.F_UNLCK, byte)

    def marked(self, byte: int) -> bool:
        """True while another process holds a read lock on the mark ``byte`` (this one's never count)."""
        try:
            got = fcntl.fcntl(self.fd, _GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0))
        except OSError:
            return False
        return _FLOCK.unpack(got)[0] != fcntl.F_UNLCK

    def _lock(self, kind: int, byte: int) -> bool:
        try:
            fcntl.fcntl(self.fd, _SETLK, _FLOCK.pack(kind, os.SEEK_SET, byte, 1, 0))
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def close(self) -> None:
        """Close the file: every lock this process held on it goes with it."""
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)


_open_files: weakref.WeakSet = weakref.WeakSet()  # (closed in a forked child: _after_fork)


def _after_fork() -> None:
    """In a forked child: close its copies of the parent's slot files. They share the parent's
    open file descriptions, so the parent's slots (and marks) stayed locked until the child
    too closed them: a DataLoader worker living for an epoch kept them, and the user's next
    download from the host waited for a connection (tests/test_api_review14_fork.py)."""
    for slots in list(_open_files):
        fd, slots.fd = slots.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def open_slots(directory: str, host: str) -> SlotFile | None:
    """``directory``/<host's name>, opened (created empty, ``0600``) for its locks; None where there
    are no OFD locks or the file cannot be used safely (the caller then shares nothing)."""
    if not AVAILABLE:
        return None
    from prefetch.errors import UnsafePathError
    from prefetch.fs.safefs import make_dirs, open_file, private_dir

    try:
        make_dirs(os.path.dirname(os.path.abspath(directory)), mode=0o700)
        private_dir(os.fspath(directory))
        fd = open_file(os.path.join(directory, slot_file_name(host)), os.O_RDWR | os.O_CREAT, 0o600)
    except (OSError, UnsafePathError):
        return None
    slots = SlotFile(fd)
    try:
        slots.marked(EXTRAS)  # (a kernel without OFD locks says EINVAL here: share nothing)
        fcntl.fcntl(fd, _GETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
    except OSError:
        slots.close()
        return None
    return slots
