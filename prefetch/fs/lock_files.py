"""Lock files: an ``flock`` on a file's own descriptor, never through a planted link or FIFO.

``_FileLock`` is one target's lock file where there is one per target (``locks.py`` chooses:
no OFD locks, or beside another user's shared file, with ``_Both``); ``exclusive_file_lock``
is one named file's lock for a block (the jobs lock), the lock filelock takes.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from prefetch.errors import LockTimeoutError
from prefetch.fs import rangelocks


def check_lock_file(path: Path) -> None:
    """Create ``path`` if needed and make sure it is a regular file, not a planted link or FIFO.

    filelock opens it with ``O_TRUNC`` and follows links: in a state dir shared with
    others (``PREFETCH_HOME`` on a team disk) a link planted there would truncate its target.

    Raises:
        UnsafePathError: a link, FIFO or device is at the lock's name.
    """
    from prefetch.fs.safefs import open_file

    os.close(open_file(path, os.O_RDONLY | os.O_CREAT, 0o644, own=False))


class _Both:
    """Beside another user's shared file: a read lock on the target's byte (excludes every
    process locking it in that file) and the per-target file's ``flock`` (excludes the others
    that, like this one, can only read it)."""

    def __init__(self, file: "_FileLock", shared: rangelocks.RangeLock) -> None:
        self.file, self.shared = file, shared

    def try_acquire(self) -> bool:
        if not self.shared.try_acquire():
            return False
        if self.file.try_acquire():
            return True
        self.shared.unlock()
        return False

    def write_owner(self, data: bytes) -> bool:
        return self.file.write_owner(data)

    def close(self) -> None:
        try:
            self.file.close()
        finally:
            self.shared.close()


class _FileLock:
    """``flock`` on the lock file's own descriptor (the kernel drops it when the holder dies).

    One open and one ``flock`` per lock: cheaper than a general-purpose lock library for the
    thousands of small files of one run. Separate opens of one file exclude each other,
    between threads of one process too. Where there is no ``flock`` (Windows) filelock does it.
    """

    def __init__(self, path: Path) -> None:
        from prefetch.fs.safefs import open_file

        self.path = path
        self.fd: int | None = None
        self._other = None
        self.writable = False  # the holder may write its owner record into the file (write_owner)
        self.wrote = False  # ... and did: emptied again on release
        try:
            import fcntl  # noqa: F401
        except ImportError:  # pragma: no cover - not POSIX
            check_lock_file(path)
            from filelock import FileLock

            self._other = FileLock(str(path))
            return
        from prefetch.errors import UnsafePathError

        try:
            self.fd = open_file(path, os.O_RDWR | os.O_CREAT, 0o644, own=False)
            self.writable = True
        except (PermissionError, UnsafePathError):  # another user's lock file (a shared state dir): read-only
            self.fd = open_file(path, os.O_RDONLY | os.O_CREAT, 0o644, own=False)

    def write_owner(self, data: bytes) -> bool:
        """Record the holder in the (held) lock file; False when it cannot be written here."""
        if self.fd is None or not self.writable:
            return False
        os.pwrite(self.fd, data, 0)
        os.ftruncate(self.fd, len(data))
        self.wrote = True
        return True

    def try_acquire(self) -> bool:
        if self._other is not None:  # pragma: no cover - not POSIX
            from filelock import Timeout

            try:
                self._other.acquire(timeout=0)
                return True
            except Timeout:
                return False
        import fcntl

        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def close(self) -> None:
        """Release the lock (closing the descriptor releases it)."""
        if self._other is not None:  # pragma: no cover - not POSIX
            self._other.release()
        elif self.fd is not None:
            fd, self.fd = self.fd, None
            if self.wrote:
                try:
                    os.ftruncate(fd, 0)  # no owner once released (while still held)
                except OSError:
                    pass
            _unlock(fd)
            os.close(fd)


@contextmanager
def exclusive_file_lock(path: Path, *, timeout: float, what: str) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if needed; never through a link, FIFO or
    device) for the block. It is the lock filelock's ``FileLock`` takes on Linux and macOS, so
    processes of earlier versions (which took it with filelock) and this one exclude each
    other, without filelock's import (~10 ms of a ``get -b`` launcher); filelock itself where
    there is no ``flock``.

    Raises:
        UnsafePathError: a link, FIFO or device is at ``path``.
        LockTimeoutError: another process held it for ``timeout`` seconds.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        from filelock import FileLock

        check_lock_file(path)
        with FileLock(str(path), timeout=timeout):
            yield
        return
    from prefetch.fs.safefs import open_file

    fd = open_file(path, os.O_RDONLY | os.O_CREAT, 0o644, own=False)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(f"{what} {path} stayed locked by another process for {timeout:g} s; "
                                           "run the command again") from None
                time.sleep(0.02)
        yield
    finally:
        _unlock(fd)
        os.close(fd)


def _unlock(fd: int) -> None:
    """Unlock before closing: a child forked while the lock was held shares the open file, and
    closing only this descriptor left the lock held until the child closed its copy too."""
    try:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)
    except (ImportError, OSError):  # pragma: no cover - not POSIX, or a descriptor without flock
        pass
