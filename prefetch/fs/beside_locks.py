"""The lock beside a target: ``<final>.part.lock``, an ``flock`` every prefetch that writes it takes.

The per-target locks of ``locks.py`` live in a state dir (``PREFETCH_HOME``): two runs with
different homes, or two users (each has a home of their own) pulling into one shared folder
or cache, never saw each other's, and both wrote the same ``.part`` at once (one of them
failed with "truncated by another process" after downloading the whole file again). This
lock lives in the target's own folder, so whoever writes the target sees it: a second run
waits for the first and then finds the file in place ("cached"), or resumes its ``.part``.

The file is empty but for its holder's owner record (``locks.LockOwner``, when it could be
written) and goes when its holder is done (unlinked while held: a process waiting on the
unlinked file sees, once it has it, that the name is no longer that file, and starts over).
Hostile folders (``/tmp``-like, group-writable):

* opened ``O_NOFOLLOW | O_NONBLOCK``, a regular file only: a planted link or FIFO at its
  name is refused in one line (``UnsafePathError``), never followed (``rm`` and ``clean``:
  no lock, ``planted_ok``);
* another user's lock file is opened read-only (an ``flock`` needs no write permission)
  and never written nor unlinked: it stays theirs (an empty file, or a record of theirs);
* an existing file is opened without ``O_CREAT`` (``fs.protected_regular`` refuses
  ``O_CREAT`` on another user's file in a sticky folder), a new one with ``O_EXCL``;
* kill -9: the kernel drops an ``flock`` with its holder; the file left is taken as is;
* no ``flock`` there (``ENOLCK``/``EOPNOTSUPP``: some NFS), or a folder we may not write
  (a cache another account filled, read here): no lock, as ``locks.py`` says, a courtesy;
  unique ``.part`` checks and the atomic rename keep the final path right.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from pathlib import Path
from typing import Callable

from prefetch.errors import InterruptedTransferError, LockTimeoutError, UnsafePathError
from prefetch.fs.locks import _HOST, BESIDE, LockOwner, beside_is_held, beside_lock_path  # noqa: F401

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: the state dir's lock only
    fcntl = None  # type: ignore[assignment]

_POLL = 0.05
_NEW = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class Waiting:
    """Who holds a target's beside lock, for the note a waiting run prints."""

    def __init__(self, path: str, owner: LockOwner | None, uid: int | None) -> None:
        self.path, self.owner, self.uid = path, owner, uid

    def describe(self) -> str:
        who = self.owner.describe() if self.owner is not None else "another process"
        mine = self.uid is None or self.uid == os.geteuid()
        return f"{who} ({'' if mine else f'another user, uid {self.uid}; '}lock {self.path})"


def _open(path: str) -> tuple[int, os.stat_result, bool] | None:
    """``(fd, its fstat, writable)`` of the lock file at ``path`` (made if absent); None: no lock here.

    Raises:
        UnsafePathError: a link, FIFO, device or directory at its name.
    """
    from prefetch.fs.safefs import is_foreign, open_file_stat

    for _ in range(100):  # (a name made and unlinked by others between our tries: try again)
        try:  # a new file first: one system call where there is none (the usual case)
            fd = os.open(path, _NEW, 0o644)
        except FileExistsError:
            pass
        except OSError:  # a folder we may not write (we cannot write its target either), a full disk,
            return None  # a name too long: no lock; the download's own writes say what is wrong
        else:
            os.fchmod(fd, 0o644)  # (a umask of 077: others could not open it to wait for us)
            return fd, os.fstat(fd), True
        try:  # what is there: never O_CREAT (fs.protected_regular refuses it on another user's file)
            fd, st = open_file_stat(path, os.O_RDONLY, own=False)
        except FileNotFoundError:
            continue
        except OSError:  # another user's file we may not even read: nothing to lock with
            return None
        if is_foreign(st) or st.st_nlink != 1 or not _ours(fd, st):
            return fd, st, False  # locked as it is, never written nor removed
        os.close(fd)
        try:  # our own (a killed run's): opened again writable, for the owner record
            fd, st = open_file_stat(path, os.O_RDWR, own=True)
        except FileNotFoundError:
            continue
        return fd, st, True
    return None


def _ours(fd: int, st: os.stat_result) -> bool:
    """A lock file a run of ours left (empty, or its owner record), not a file of the user's that
    happens to have the name: only ours is written and removed."""
    if st.st_size == 0:
        return True
    try:
        return st.st_size <= 4096 and os.pread(fd, 8, 0) == b'{"pid": '
    except OSError:
        return False


def _same(st: os.stat_result, path: str) -> bool:
    """The name ``path`` is still the file ``st`` describes (not unlinked or replaced meanwhile)."""
    try:
        here = os.lstat(path)
    except OSError:
        return False
    return here.st_ino == st.st_ino and here.st_dev == st.st_dev


def _flock(fd: int) -> bool | None:
    """True: held; False: another holds it; None: no ``flock`` on this filesystem."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return None
        raise
    return True


def _waiting(fd: int, path: str) -> Waiting:
    import json

    owner = None
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"null")
        if isinstance(data, dict):
            owner = LockOwner(**data)
            if not (isinstance(owner.pid, int) and isinstance(owner.host, str)
                    and isinstance(owner.started, (int, float)) and not isinstance(owner.started, bool)):
                owner = None
    except (OSError, ValueError, TypeError):
        owner = None
    try:
        uid = os.fstat(fd).st_uid
    except OSError:
        uid = None
    return Waiting(path, owner, uid)


class beside_lock:  # noqa: N801 - a context manager used as a function: ``with beside_lock(final, ...)``
    """Hold ``final``'s beside lock for the block; ``with`` gives True when another process held it first.

    ``timeout`` 0: never wait (raises ``LockTimeoutError`` at once when it is held).
    ``record``: write the holder's owner record into the lock file (when it is ours).
    ``planted_ok``: a link, FIFO or device at the lock's name is no lock (never followed nor
    removed) instead of an error: ``rm`` and ``clean`` go on (no run holds a lock at such a
    name: each refuses it, and a held lock file stays at its name until its holder is done).
    (A class, not a generator: the bulk lane takes one a file.)

    Raises (on entering):
        LockTimeoutError: still held by another process after ``timeout`` seconds.
        InterruptedTransferError: ``stop`` was set while waiting.
        UnsafePathError: a link, FIFO or device at the lock's name (unless ``planted_ok``).
    """

    __slots__ = ("final", "timeout", "stop", "on_wait", "job", "record", "planted_ok", "path", "fd", "st",
                 "writable")

    def __init__(self, final: Path | str, *, timeout: float, stop: threading.Event | None = None,
                 on_wait: Callable[[Waiting], None] | None = None, job: str | None = None,
                 record: bool = True, planted_ok: bool = False) -> None:
        self.final, self.timeout, self.stop, self.on_wait = final, timeout, stop, on_wait
        self.job, self.record, self.planted_ok = job, record, planted_ok
        self.fd: int | None = None

    def __enter__(self) -> bool:
        if fcntl is None:  # pragma: no cover - not POSIX: the state dir's lock only
            return False
        self.path = path = beside_lock_path(self.final)
        waited = False
        fd = None
        try:
            while True:
                try:
                    opened = _open(path)
                except UnsafePathError:
                    if not self.planted_ok:
                        raise
                    opened = None
                if opened is None:
                    break
                fd, st, writable = opened
                got = _flock(fd)
                if got is False:
                    got = _wait(fd, path, self.final, self.timeout, self.stop, self.on_wait if not waited else None)
                    waited = True
                if got is None:  # no flock here: no lock (a courtesy)
                    os.close(fd)
                    fd = None
                    break
                if _same(st, path):
                    break
                _release(fd)  # the holder before us unlinked it (done): a new file at the name, or none
                fd = None
            if fd is not None and self.record and writable:
                _write_owner(fd, path, self.job, st.st_size)
        except BaseException:
            if fd is not None:
                _release(fd)
            raise
        if fd is not None:
            self.fd, self.st, self.writable = fd, st, writable
        return waited

    def __exit__(self, *exc) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            try:  # ours only (another user's stays theirs, as remove_own leaves their entries)
                if self.writable and _same(self.st, self.path):
                    os.unlink(self.path)  # (held: whoever waits on it sees the name gone and starts over)
            except OSError:
                pass
            _release(fd)


def _wait(fd: int, path: str, final, timeout: float, stop, on_wait) -> bool | None:
    """Wait for the lock on ``fd`` another process holds: ``_flock``'s answer once it is not False."""
    if timeout <= 0:
        raise LockTimeoutError(f"{final} is being downloaded by {_waiting(fd, path).describe()}")
    if on_wait is not None:
        on_wait(_waiting(fd, path))
    return _poll(fd, os.path.basename(os.fspath(final)), timeout, stop,
                 lambda: f"{final} is being downloaded by {_waiting(fd, path).describe()}; "
                         f"waited {timeout:.0f}s. Wait for it or stop that download")


def _poll(fd: int, name: str, timeout: float, stop, timed_out: Callable[[], str]) -> bool | None:
    """``_flock(fd)`` every ``_POLL`` s until it is not False (its answer), within ``timeout``.

    Raises:
        LockTimeoutError: ``timed_out()``'s words. InterruptedTransferError: ``stop`` was set.
    """
    deadline = time.monotonic() + timeout
    while True:
        if stop is not None and stop.is_set():
            raise InterruptedTransferError(f"{name}: stopped while waiting for another download of it")
        left = deadline - time.monotonic()
        if left <= 0:
            raise LockTimeoutError(timed_out())
        if stop is not None:
            stop.wait(min(left, _POLL))
        else:
            time.sleep(min(left, _POLL))
        got = _flock(fd)
        if got is not False:
            return got


def _write_owner(fd: int, path: str, job: str | None, size: int) -> None:
    """The holder's record (``locks.LockOwner``'s fields, as JSON) in the lock file."""
    try:  # json.dumps' quoting of a str, without importing json (a plain get never loads it)
        from _json import encode_basestring_ascii as quoted
    except ImportError:  # pragma: no cover
        from json.encoder import encode_basestring_ascii as quoted
    from prefetch.fs.rangelocks import pid

    data = (f'{{"pid": {pid()}, "host": {quoted(_HOST)}, "started": {time.time()!r}, '
            f'"target": {quoted(path[:-len(BESIDE)])}, "job": {"null" if job is None else quoted(job)}}}').encode()
    try:
        os.pwrite(fd, data, 0)
        if size > len(data):  # (a killed run's longer record under it)
            os.ftruncate(fd, len(data))
    except OSError:  # (a courtesy: a full disk still locks)
        pass


def _release(fd: int) -> None:
    try:  # (unlocked before the close: a child forked meanwhile shares the open file)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        pass
    os.close(fd)


# The bulk lane (flow/file_batch.py) takes no lock file per file (a new file in the folder cost
# 0.25 ms a file there, as much as the .part itself): it creates each .part with O_EXCL and
# holds an flock on it until the file is placed. A run's usual path, holding the lock beside
# the file, waits for a .part so locked (wait_for_part_writer); the lane, once its .part is
# locked, gives the file up to a run holding that lock (lock_new_part). Each takes its own
# lock before it looks at the other's, so at least one of the two sees the other.


try:  # the .parts the lane keeps open (locked) at most: a quarter of the descriptors a process may have
    PARTS_HELD = max(0, os.sysconf("SC_OPEN_MAX") // 4)
except (ValueError, OSError, AttributeError):  # pragma: no cover
    PARTS_HELD = 64


def lock_new_part(fd: int, final, part: str) -> bool:
    """Lock the ``.part`` the bulk lane just made (``fd``, ``O_EXCL``, nothing written yet) and make
    sure no run holds ``final``'s beside lock; False (``fd`` closed, the empty ``.part`` left to
    that run): the file goes the usual path, which waits for that run."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another run's usual path opened it first: it is theirs now
        os.close(fd)
        return False
    except OSError:  # no flock on this filesystem: the .part checks before the rename still hold
        pass
    if beside_is_held(final):  # (taken before our .part existed: that run goes on, this file goes back)
        # The empty .part stays: that run's engine may have opened it already (it opens the
        # .part without O_EXCL) and would find the name gone when it renames; it takes it as
        # its own, or removes it when it is another user's (claim_part), or, if that run goes
        # no further, this run's usual path does.
        _release(fd)
        return False
    return True


def claim_part(part: str) -> None:
    """Make ``part`` this run's own before its engine opens it: called by a run holding the lock
    beside the file, after :func:`wait_for_part_writer`.

    A bulk lane that made its ``.part`` just before it saw that lock held leaves it, empty (its
    maker's engine-less look cannot tell whether this run opened it already): of this user, the
    engine takes it as its own; of another user (another account's lane, in a shared folder),
    the engine may not write it and the file failed ("belongs to another user", exit 5). Such a
    ``.part`` (a regular file, empty, one name, another user's) is removed here, never opened nor
    written: no lane writes a file whose beside lock is held. Where there is no ``.part``, an empty
    one of ours is made now (``O_EXCL``): a lane coming after finds the name taken and gives the
    file back, instead of leaving another empty one between this look and the engine's open. In a
    sticky folder another user's entry cannot be removed: the engine's refusal stands.
    """
    from prefetch.fs.safefs import is_foreign, lstat_or_none

    for _ in range(3):
        try:
            os.close(os.open(part, _NEW, 0o644))
            return
        except FileExistsError:
            pass
        except OSError:  # a folder we may not write, a full disk: the engine's open says so
            return
        st = lstat_or_none(part)
        if st is None:
            continue
        if not (stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_nlink == 1 and is_foreign(st)):
            return  # ours (resumed or adopted), or not ours to touch: the engine decides, as before
        try:
            os.unlink(part)
        except FileNotFoundError:
            continue
        except OSError:  # (EPERM: a sticky folder)
            return


def release_part(fd: int) -> None:
    """Unlock and close a ``.part`` ``lock_new_part`` locked (unlocked first: a child forked
    meanwhile shares the open file, and its copy would keep the lock until it exits)."""
    _release(fd)


def wait_for_part_writer(part: str, *, timeout: float, stop: threading.Event | None = None,
                         on_wait: Callable[[], None] | None = None) -> bool:
    """Wait while another run's bulk lane holds ``part`` (its ``flock``); True when it waited.
    Called with the lock beside the file held, before the file is looked at.

    Raises:
        LockTimeoutError: still held after ``timeout`` seconds. InterruptedTransferError: ``stop``.
    """
    if fcntl is None:  # pragma: no cover - not POSIX
        return False
    try:
        fd = os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False  # none (the usual case), or a link or FIFO: the usual checks refuse it
    try:
        if _flock(fd) is not False:
            return False
        if on_wait is not None:
            on_wait()
        _poll(fd, os.path.basename(part), timeout, stop,
              lambda: f"{part} is being written by another process; waited {timeout:.0f}s")
        return True
    finally:
        _release(fd)
