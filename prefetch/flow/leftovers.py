"""What a killed run left beside a file: temp files and half-made extraction dirs, found and removed.

A directory is listed once per run (``LeftoverScan``), not once per file: with
thousands of files in one directory a listing per file costs more than their downloads.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from prefetch.cache.layout import part_path, state_path
from prefetch.fs.locks import hold_lock
from prefetch.fs.safefs import lstat_or_none, remove_own
from prefetch.model.plans import FilePlan


HOLD_MOST = 16  # folders a run holds open (fs/made_dirs.py): its first ones; a descriptor each


class LeftoverScan:
    """The temp-looking names of each directory, listed the first time a file asks (thread-safe).

    Leftovers are what a killed run left before this one: a name that appears during the
    run is a live writer's, never listed. A listed name already gone is simply skipped.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirs: dict[Path, list[str]] = {}
        self._made: set[Path] = set()
        self.created: list[Path] = []  # folders this run created (each mkdir that succeeded), top ones first
        self._held: list[int] = []  # the folders its files go into, held (fs/made_dirs.py: hold_dir)

    def make_dirs(self, where: Path, *, private: bool = False) -> None:
        """A file's folder (check the chain, create it) once per directory per run, not once per file."""
        if where in self._made:
            return
        from prefetch.cache.placement import make_dirs

        from prefetch.fs.made_dirs import hold_dir

        made: list = []
        held = None
        try:
            for _ in range(3):  # (another run removed it before this one held it: made again)
                make_dirs(where, private=private, made=made)
                if len(self._held) >= HOLD_MOST:
                    break  # (a list into thousands of folders: not a descriptor each for the run)
                held = hold_dir(where)  # (so that another run's end never removes it: fs/made_dirs.py)
                if held is not None or os.path.isdir(where):
                    break
        finally:
            with self._lock:
                self.created += made
                if held is not None:
                    self._held.append(held)
        with self._lock:
            self._made.add(where)

    def remove_empty_created(self) -> None:
        """The run is over: a folder it created and left empty goes (``-P newdir`` of a download that
        failed before its first byte: a 404, a name that does not resolve); never one that was
        there before, never one with anything in it, never through a link (``safefs.remove_made_dirs``)."""
        from prefetch.fs.made_dirs import remove_made_dirs

        with self._lock:
            created, self.created = self.created, []
            held, self._held = self._held, []
        for fd in held:
            os.close(fd)
        remove_made_dirs(created)

    def names(self, where: Path) -> list[str]:
        with self._lock:
            names = self._dirs.get(where)
            if names is None:
                try:
                    with os.scandir(where) as entries:
                        names = [e.name for e in entries if e.name.startswith(".") and (
                            e.name.endswith(".tmp") or ".extract-" in e.name or ".old-" in e.name)]
                except OSError:
                    names = []
                self._dirs[where] = names
            return names


def remove_leftovers(plan: FilePlan, *, locks_dir: Path, lock_timeout: float, scan: LeftoverScan | None = None,
                     state: Path | None = None) -> None:
    """Delete temp files a killed run left for ``plan``; call it with the plan's lock held.

    Half-written extraction dirs (``.NAME.extract-*``, ``.NAME.old-*``), state or
    alias temp files, and an alias still linked to the ``.part``. The ``.part`` and its state stay: a resume continues from them.
    An extraction dir can be shared by several files (cifar10 and cifar100 both extract
    into ``datasets/``), so its temp dirs are only removed under that dir's extraction
    lock: another file's extraction in progress is not a leftover. ``state``: ``state_path(plan.final)``
    when the caller has it.
    """
    scan = scan if scan is not None else LeftoverScan()

    def remove(spots) -> None:
        for where, prefixes, suffix in spots:
            shortest = min(map(len, prefixes)) + len(suffix)
            for name in scan.names(where):
                if name.startswith(prefixes) and name.endswith(suffix) and len(name) >= shortest:
                    remove_own(where / name)  # another user's entry of that name is left alone

    state = state if state is not None else state_path(plan.final)  # (``state``: the caller's, made once)
    remove([(plan.final.parent, (f".{state.name}.",), ".tmp")])  # replace_file's temp names
    for alias in (*plan.also, *plan.decompress_to):
        remove([(alias.parent, (f".{alias.name}.",), ".tmp")])
    if plan.also:
        # An extra name is linked to the verified .part just before the .part becomes plan.final: a
        # run killed between the two left the .part with a second name, which the resume would
        # refuse as a hard link prefetch did not make. It made this one: the name goes (made again
        # at the end, from the same bytes).
        part = lstat_or_none(part_path(plan.final))
        for alias in plan.also if part is not None and part.st_nlink > 1 else ():
            st = lstat_or_none(alias)
            if st is not None and (st.st_dev, st.st_ino) == (part.st_dev, part.st_ino):
                remove_own(alias)
    for into in plan.extract_into:
        into = Path(os.path.abspath(into))
        with extraction_lock(locks_dir, into, timeout=lock_timeout):
            remove([(where, (f".{into.name}.extract-", f".{into.name}.old-"), "")
                    for where in (into.parent, into)])


def extraction_lock(locks_dir: Path, into: Path, *, timeout: float):
    """The lock for extracting into ``into`` (taken after a file's own lock, never before)."""
    key = Path(os.path.abspath(into))
    return hold_lock(locks_dir, key.parent / f".{key.name}.extracting", timeout=timeout)
