"""Cross-process locks per target file, with a visible owner.

Locks are a courtesy (``flock`` can do nothing on NFS/Lustre): correctness
comes from ``.part`` files, verification and atomic renames. A lock held by a
process that died is released by the kernel, so it is never stale; the owner
record only tells waiting processes who they are waiting for.

On Linux every target of a locks dir is a byte of one shared file (``rangelocks``: no
new inode per target); elsewhere, and beside another user's shared file, a lock file
per target (``lock_files._FileLock``).
"""

from __future__ import annotations

import errno
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from prefetch.errors import InterruptedTransferError, LockTimeoutError
from prefetch.fs import rangelocks
from prefetch.fs.files import replace_file
from prefetch.fs.hashing import sha1
from prefetch.fs.safefs import as_path
from prefetch.model.lean import dataclass


@dataclass(frozen=True)
class LockOwner:
    """Who holds a lock."""

    pid: int
    host: str
    started: float
    target: str
    job: str | None = None

    def describe(self) -> str:
        age = time.time() - self.started
        job = f", job {self.job}" if self.job else ""
        return f"pid {self.pid} on {self.host}{job}, for {age:.0f}s"


def lock_key(target: Path | str) -> str:
    """``target``'s lock key: a hash of its absolute path (hex)."""
    target = as_path(target)
    name = str(target if target.is_absolute() else target.absolute())
    return sha1(name.encode("utf-8", "surrogateescape")).hexdigest()[:20]  # (the same key as ever for UTF-8)


def lock_path(locks_dir: Path, target: Path) -> Path:
    """The lock file for ``target`` where there is one per target (named by its ``lock_key``)."""
    return _key_file(locks_dir, lock_key(target))


def _key_file(locks_dir: Path, key: str, suffix: str = ".lock") -> Path:
    """The per-target lock file (or, ``.owner``, its owner record) of the target ``key`` names."""
    return locks_dir / f"{key}{suffix}"


def shared_lock_path(locks_dir: Path) -> Path:
    """The one file holding the locks of every target of ``locks_dir`` (``rangelocks``)."""
    return locks_dir / rangelocks.NAME


def read_owner(lock_file: Path) -> LockOwner | None:
    """The owner of ``lock_file``'s target: its record in the shared file, in ``lock_file``
    itself, or beside it (``.owner``), if any."""
    import json

    from prefetch.errors import UnsafePathError
    from prefetch.fs.safefs import read_bytes

    try:
        raw = None
        if rangelocks.AVAILABLE:
            raw = rangelocks.read_record(lock_file.parent, lock_file.stem)
            data = json.loads(raw) if raw else None
            if not isinstance(data, dict) or data.pop("key", None) != lock_file.stem:
                raw = None  # (a slot another target's record took: not this target's owner)
        if not raw:
            try:
                raw = read_bytes(lock_file, own=False)  # the holder's record, written in the lock file itself
            except (OSError, UnsafePathError):
                raw = None
            if not raw:
                raw = read_bytes(lock_file.with_suffix(".owner"), own=False)  # (a lock file of another user's)
            data = json.loads(raw) if raw else None
        owner = LockOwner(**data)
    except (OSError, ValueError, TypeError, UnsafePathError):
        return None
    # A hand-edited or foreign owner file must not crash the message that names it.
    if not (isinstance(owner.pid, int) and isinstance(owner.host, str) and isinstance(owner.started, (int, float))
            and not isinstance(owner.started, bool) and (owner.job is None or isinstance(owner.job, str))):
        return None
    return owner


@contextmanager
def hold_lock(
    locks_dir: Path,
    target: Path,
    *,
    timeout: float,
    job: str | None = None,
    on_wait: Callable[[LockOwner | None], None] | None = None,
    stop: threading.Event | None = None,
) -> Iterator[bool]:
    """Hold the lock for ``target``; yields True if we had to wait for another process.

    Args:
        stop: while waiting, give up as soon as it is set (Ctrl-C, cancel).

    Raises:
        LockTimeoutError: still held by someone else after ``timeout`` seconds.
        InterruptedTransferError: ``stop`` was set while waiting.
        LocalFileError: ``locks_dir`` cannot be used (DiskFullError when it is full).
    """
    key = lock_key(target)
    try:
        try:
            lock = _new_lock(locks_dir, key)  # never through a planted link or FIFO (safefs' opens)
        except FileNotFoundError:  # the first lock of this state dir (not a mkdir per file)
            locks_dir.mkdir(parents=True, exist_ok=True)
            lock = _new_lock(locks_dir, key)
    except OSError as exc:
        raise _locks_dir_error(exc, locks_dir) from None
    try:
        waited = _acquire(lock, key, target, locks_dir, timeout=timeout, on_wait=on_wait, stop=stop)
        started = time.time()
        if isinstance(lock, rangelocks.RangeLock):
            data = _record(key, started, str(target), job)
        else:
            import json

            data = json.dumps(LockOwner(pid=rangelocks.pid(), host=_HOST, started=started, target=str(target),
                                        job=job).__dict__).encode()
        owner_file = None
        try:
            if not lock.write_owner(data):  # (in the lock file itself: no temp file, rename and unlink per lock)
                owner_file = _key_file(locks_dir, key, ".owner")  # another user's lock file: the owner beside it
                replace_file(owner_file, data)
        except OSError as exc:  # (the owner record is a courtesy; the lock itself needs no room:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):  # a full state disk: go on)
                raise _locks_dir_error(exc, locks_dir) from None
            owner_file = None
    except BaseException:
        lock.close()
        raise
    try:
        yield waited
    finally:
        if owner_file is not None:
            try:
                owner_file.unlink()
            except OSError:
                pass
        lock.close()


_HOST = os.uname().nodename  # socket.gethostname(), without socket's import in a launcher
_POLL = 0.05  # seconds between tries while another process holds a lock


def _new_lock(locks_dir: Path, key: str):
    """``key``'s lock: its byte of the shared file, or (that file being another user's) that
    byte read-locked and the per-target file; a per-target file where there are no OFD locks."""
    if not rangelocks.AVAILABLE:
        from prefetch.fs.lock_files import _FileLock

        return _FileLock(_key_file(locks_dir, key))
    shared = rangelocks.RangeLock(locks_dir, key)
    if shared.writable:
        return shared  # (the usual case: lock_files is not even loaded)
    try:
        from prefetch.fs.lock_files import _Both, _FileLock

        return _Both(_FileLock(_key_file(locks_dir, key)), shared)
    except BaseException:
        shared.close()
        raise


_QUOTED: list = []  # json.dumps' quoting of a str, found once (a `from` import costs 2-5 us a lock)


def _quoting():
    """json.dumps' quoting of a str (json.encoder's own C function), without importing json."""
    try:
        from _json import encode_basestring_ascii as quoted
    except ImportError:
        from json.encoder import encode_basestring_ascii as quoted
    _QUOTED.append(quoted)
    return quoted


def _record(key: str, started: float, target: str, job: str | None) -> bytes:
    """The owner record for the shared file: ``LockOwner``'s fields and the key, as JSON of at
    most ``rangelocks.RECORD`` bytes (a long target is kept by its end)."""
    quoted = _QUOTED[0] if _QUOTED else _quoting()
    head = f'{{"pid": {rangelocks.pid()}, "host": {quoted(_HOST)}, "started": {started!r}, "target": '
    tail = f', "job": {"null" if job is None else quoted(job)}, "key": "{key}"}}'
    data = (head + quoted(target) + tail).encode()
    if len(data) >= rangelocks.RECORD:
        cut = len(data) - rangelocks.RECORD + 8
        data = (head + quoted("..." + target[cut:] if cut < len(target) else "") + tail).encode()
    return data


def _acquire(lock, key: str, target: Path, locks_dir: Path, *, timeout: float,
             on_wait, stop: threading.Event | None) -> bool:
    """Take ``lock``; True when another process held it first (we waited)."""
    try:
        if lock.try_acquire():
            return False
        path = _key_file(locks_dir, key)  # (read_owner finds the record by it, wherever it is)
        if on_wait is not None:
            on_wait(read_owner(path))
        deadline = time.monotonic() + timeout
        while True:  # in short slices, so that a stop is seen within a fraction of a second
            if stop is not None and stop.is_set():
                raise InterruptedTransferError(f"{target.name}: stopped while waiting for another download of it")
            left = deadline - time.monotonic()
            if left <= 0:
                owner = read_owner(path)
                who = owner.describe() if owner else "another process"
                raise LockTimeoutError(
                    f"{target} is being downloaded by {who}; waited {timeout:.0f}s. "
                    f"Wait for it (`prefetch wait`) or cancel that job"
                ) from None
            if stop is not None:
                stop.wait(min(left, _POLL))
            else:
                time.sleep(min(left, _POLL))
            if lock.try_acquire():
                return True
    except OSError as exc:
        raise _locks_dir_error(exc, locks_dir) from None


def _locks_dir_error(exc: OSError, locks_dir: Path):
    """The user-facing error when prefetch's own lock directory is unusable."""
    import errno

    from prefetch.errors import OPEN_FILES_ERRNOS, LocalFileError, too_many_open_files
    from prefetch.fs.files import local_error

    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return local_error(exc, locks_dir)
    if exc.errno in OPEN_FILES_ERRNOS:  # (the process's limit, not the folder: the line that says so)
        return too_many_open_files()
    return LocalFileError(
        f"cannot use the lock directory {locks_dir}: {exc.strerror or exc}; prefetch keeps "
        f"its state there: make it writable or set PREFETCH_HOME to a writable directory"
    )


def lock_is_held(locks_dir: Path, target: Path) -> bool:
    """True while some process holds ``target``'s lock, here or beside it (a run of another home
    or user: ``beside_locks``); creates nothing (safe for dry runs)."""
    import fcntl

    if beside_is_held(target):
        return True
    key = lock_key(target)
    if rangelocks.AVAILABLE and rangelocks.is_held(locks_dir, key):
        return True
    try:
        fd = os.open(_key_file(locks_dir, key), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return False  # no lock file: nobody ever locked it here
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


BESIDE = ".part.lock"  # the lock beside a target (beside_locks.py): ``<final>.part.lock``


def beside_lock_path(final: Path | str) -> str:
    """The lock file beside ``final``, in its folder (``beside_locks.beside_lock``)."""
    return os.fspath(final) + BESIDE


def beside_is_held(final: Path | str) -> bool:
    """True while some process (of any home or user) holds ``final``'s beside lock; creates nothing."""
    import fcntl

    try:
        fd = os.open(beside_lock_path(final), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False  # none (or a link, FIFO: not a lock anybody holds)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # (a holder's LOCK_EX refuses it; other lookers do not)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False
