"""huggingface_hub's own per-blob lock (``.locks/<repo>/<etag>.lock``), taken the way it takes it.

While prefetch downloads a blob it holds the lock huggingface_hub takes for the same blob,
so a library download of that file in the notebook waits for prefetch (and prefetch for it)
instead of both writing. Never through a planted link: ``O_NOFOLLOW``, a regular file owned
as expected, else one line (``UnsafePathError``).

May import: ``errors``, ``model``, ``fs``.
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from prefetch.errors import InterruptedTransferError, UnsafePathError
from prefetch.fs import safefs
from prefetch.fs.lock_files import check_lock_file
from prefetch.model.events import Event, EventKind


class _Waiting(Protocol):
    """What a blob's download gives the lock (``hf/download.py``'s context): a stop to watch
    while waiting, and where a note that it waits goes."""

    stop: Any  # threading.Event
    progress: Any  # .emit(Event)


@contextmanager
def blob_lock(path: Path, ctx: _Waiting, label: str):
    """huggingface_hub's own per-blob lock, so that it waits for us (and we for it), when it can be taken.

    huggingface_hub takes it with filelock, an ``flock`` on Linux and macOS: one ``flock`` on
    our own descriptor is the same lock, without filelock's per-lock machinery (a blob of
    a repo of hundreds costs less). Never through a planted link (``O_NOFOLLOW``).
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        with _blob_filelock(path, ctx, label):
            yield
        return
    flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        safefs.make_dirs(path.parent)  # a planted .locks link anywhere above: refused (UnsafePathError)
        fd = os.open(path, flags, 0o664)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            check_lock_file(path)  # a link at the lock's name: refused in one line (UnsafePathError)
        yield  # a read-only .locks: prefetch's own lock and the atomic rename still hold
        return
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device planted at the lock's name
        os.close(fd)
        check_lock_file(path)  # raises UnsafePathError
        raise UnsafePathError(f"refusing to use {path}: not a regular file")
    try:
        told = False
        waited = 0.0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if ctx.stop.is_set():
                    raise InterruptedTransferError(f"{label}: stopped while waiting for {path}") from None
                if not told and waited >= 1.0:
                    told = True
                    ctx.progress.emit(Event(EventKind.NOTE, label,
                                            message=f"waiting for another download of this blob ({path} is locked)"))
                ctx.stop.wait(0.05)
                waited += 0.05
            except OSError:
                yield
                return
        yield
    finally:
        try:  # (unlocked, not only closed: a child forked meanwhile shares the open file, and its
            fcntl.flock(fd, fcntl.LOCK_UN)  # copy kept the lock held: tests/test_api_review14_fork.py)
        except OSError:
            pass
        os.close(fd)


@contextmanager
def _blob_filelock(path: Path, ctx: _Waiting, label: str):  # pragma: no cover - not POSIX
    from filelock import FileLock, Timeout

    try:
        safefs.make_dirs(path.parent)  # a planted .locks link: refused (UnsafePathError), never followed
        check_lock_file(path)  # a link or FIFO there: refused (older filelock opens it O_TRUNC and chmods it)
        lock = FileLock(str(path), mode=0o664)
    except (OSError, TypeError):
        yield
        return
    while True:
        try:
            lock.acquire(timeout=1.0)
            break
        except Timeout:
            if ctx.stop.is_set():
                raise InterruptedTransferError(f"{label}: stopped while waiting for {path}") from None
        except OSError:
            yield
            return
    try:
        yield
    finally:
        lock.release()
