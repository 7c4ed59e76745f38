"""Folders a run created and left empty, taken away at its end; never one another run uses.

``prefetch get -P newdir URL`` that fails before its first byte (a 404, a name that does not
resolve) left the empty ``newdir`` (every level of ``-P a/b/c``) it created. The run records the
levels it created (``safefs.make_dirs(made=...)``) and at its end :func:`remove_made_dirs` takes
away those still empty, the deepest first.

Another run may have found such a folder there and be about to write into it (two ``-b`` jobs
into one new ``-P``, one failing at once): each run holds a shared ``flock`` on the folders its
files go into (:func:`hold_dir`, from before it looks whether the folder exists until its end;
its first 16, ``flow/leftovers.py``: a descriptor each),
and a folder is removed only under an exclusive one taken without waiting. A run that finds the
folder gone once it holds the lock makes it again. The shared lock is waited for at most
``HOLD_WAIT`` seconds (a removal's hold is brief), never blocking: another program's exclusive
lock on the folder (``flock /data ./download.sh``, the shell's way to keep two runs of a script
apart) held the run there for ever, deaf to SIGTERM; such a folder is used without the hold (no
run can remove it while that lock is held).
"""

from __future__ import annotations

import os
import stat
import time

from prefetch.fs.safefs import lstat_or_none

HOLD_WAIT = 1.0  # seconds hold_dir waits for a folder another process holds exclusively (a removal: brief)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def hold_dir(path) -> int | None:
    """A descriptor of folder ``path`` with a shared ``flock`` on it (close it to let go), or None:
    not a folder (gone, a link: never followed), not readable, removed while it was locked, or
    held exclusively by another process for more than ``HOLD_WAIT`` seconds."""
    import fcntl

    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return None
    try:
        deadline = time.monotonic() + HOLD_WAIT
        while True:  # (never a blocking flock: another program may hold the folder for hours)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:  # (another run removing it: an rmdir; or a program's flock of it)
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)
        held, now = os.fstat(fd), os.lstat(path)
        if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def remove_made_dirs(made: list) -> list:
    """Remove the folders of ``made`` (``safefs.make_dirs``'s, the top one first) that are still
    empty and that no run holds (:func:`hold_dir`), the deepest first; the ones removed.

    Only a real, empty folder goes (``rmdir``): one with anything in it stays, and so does a
    link put in a level's place (never opened through, never removed), as does every level
    under a link: each level's made folders up to the top one are looked at first.
    """
    import fcntl

    removed = []
    for level in reversed(made):
        chain = [p for p in made if p == level or p in level.parents]
        if not all((st := lstat_or_none(p)) is not None and stat.S_ISDIR(st.st_mode) for p in chain):
            continue
        try:
            fd = os.open(level, _DIR_FLAGS)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rmdir(level)
        except OSError:
            continue  # (another run's folder, or not empty: a file, a .part to resume from)
        finally:
            os.close(fd)
        removed.append(level)
    return removed
