"""Removing what is on disk, and counting what it took: shared by ``rm`` and ``clean`` of every cache.

Sizes are what the files take on disk (allocated blocks, as ``du`` counts), each
inode once. Links are removed as links, never followed; another user's entry in a
shared cache is left alone and named.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from prefetch.errors import LockTimeoutError
from prefetch.fs import safefs
from prefetch.fs.locks import hold_lock, lock_is_held


@dataclass
class Removal:
    """One path removed (or, with ``dry_run``, to be removed)."""

    path: str
    bytes: int
    reason: str  # file | alias | extracted | partial | state | marker | temp


@dataclass
class RemoveResult:
    """The outcome of ``remove_datasets`` / ``clean_cache``."""

    removed: list[Removal] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # one line each: what was left and why
    not_ours: list[str] = field(default_factory=list)  # another user's entries (a shared cache), left alone
    not_placed: list[str] = field(default_factory=list)  # at a name prefetch would use, but not its own: left alone
    dry_run: bool = False

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.removed)


def disk_bytes(path: Path, seen: set[tuple[int, int]] | None = None) -> int:
    """Bytes ``path`` takes on disk (a tree: everything in it), links not followed, inodes counted once."""
    seen = set() if seen is None else seen
    total = 0
    stack = [str(path)]
    while stack:
        current = stack.pop()
        try:
            st = os.lstat(current)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in seen:
            continue
        seen.add(key)
        total += st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size
        if stat.S_ISDIR(st.st_mode):
            try:
                stack.extend(os.path.join(current, name) for name in os.listdir(current))
            except OSError:
                pass
    return total


def remove_paths(paths: list[tuple[Path, str]], result: RemoveResult, *, dry_run: bool) -> None:
    """Remove each ``(path, reason)`` (or with ``dry_run`` only count it) into ``result``."""
    seen: set[tuple[int, int]] = set()
    for path, kind in paths:
        st = safefs.lstat_or_none(path)
        if st is None:
            continue
        if safefs.is_foreign(st):  # a shared cache: another user's entry is theirs to remove
            result.not_ours.append(f"{path}: belongs to another user (uid {st.st_uid}); left alone")
            continue
        size = disk_bytes(path, seen)
        if not dry_run:
            safefs.remove_tree(path)  # a link itself; a tree without entering links
        result.removed.append(Removal(path=str(path), bytes=size, reason=kind))


def remove_unless_busy(paths: list[tuple[Path, str]], folder: Path, result: RemoveResult, *, locks: Path,
                       dry_run: bool) -> None:
    """Remove ``paths`` (a repo's, or one revision's) holding ``folder``'s lock; a repo being downloaded is skipped."""
    if dry_run:
        if lock_is_held(locks, folder):
            result.skipped.append(_busy(folder))
            return
        remove_paths(paths, result, dry_run=True)
        return
    try:
        with hold_lock(locks, folder, timeout=0):
            remove_paths(paths, result, dry_run=False)
    except LockTimeoutError:
        result.skipped.append(_busy(folder))


def _busy(folder: Path) -> str:
    return f"{folder}: being downloaded; left alone (`prefetch cancel` its job first)"
