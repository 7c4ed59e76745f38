"""The bulk lane's looks before a chunk's requests (``flow/file_batch.py``): nothing at a file's
final name, ``.part``, state record or lock beside it (``.part.lock``), and no temp name a killed
run left for it. (A lock file a run killed with ``kill -9`` left, alone: the lane never opens it,
so it stayed in the folder for ever; the usual path takes it and removes it.)

Taken under the chunk's locks, from ONE listing of each folder per chunk (a set of its names)
instead of three ``lstat``s and their path objects a file. A listing says "absent" only where
names are compared as they are spelled: in a folder that answers to a listed name with its case
changed (vfat, ext4's casefold folders: probed with one ``lstat`` per listing), for a name that
is not ASCII (a filesystem may normalize it) or has a ``~`` (a FAT short name), and in a folder
too big to list for a chunk (``Looks.DIR_BYTES_A_FILE``) or one that cannot be listed, the file
is looked at with ``lstat``s as before. A killed run's temp names come from the run's listing
(``LeftoverScan``), as for the usual path.
"""

from __future__ import annotations

import os
from pathlib import Path

from prefetch.cache.layout import part_path, state_path
from prefetch.fs.locks import beside_lock_path
from prefetch.fs.safefs import lstat_or_none


class Looks:
    """One chunk's looks; ``files``: how many of the chunk's files are in each folder (str)."""

    DIR_BYTES_A_FILE = 512  # a folder whose size says more than this a file of the chunk (and 64 KiB): lstats

    def __init__(self, leftovers, files: dict[str, int]) -> None:
        self.leftovers = leftovers
        self.files = files
        self.listed: dict[str, tuple | None] = {}

    def nothing_there(self, plan) -> bool:
        """No final file, ``.part``, state record, lock file or a killed run's temp names for
        ``plan`` (under its lock)."""
        folder, name = os.path.split(os.fspath(plan.final))
        listed = self.listed.get(folder, False)
        if listed is False:
            listed = self.listed[folder] = self._list(folder)
        if listed is None or "~" in name or not name.isascii():
            return nothing_there(plan, self.leftovers)
        names, temps = listed
        part = name + ".part"
        if name in names or part in names or part + ".json" in names or part + ".lock" in names:
            return False
        if temps:
            prefix = f".{part}.json."
            return not any(n.startswith(prefix) for n in temps)
        return True

    def _list(self, folder: str) -> tuple | None:
        """``(names, the run's temp names there)`` of ``folder``; None: look with lstats."""
        where = folder or "."
        try:
            if os.stat(where).st_size > self.DIR_BYTES_A_FILE * self.files.get(folder, 1) + (64 << 10):
                return None  # (a big folder: a listing per chunk would cost more than the lstats)
            names = set(os.listdir(where))
            if not _case_kept(where, names):
                return None
        except OSError:
            return None
        return names, self.leftovers.names(Path(where))


def _case_kept(folder: str, names: set[str]) -> bool:
    """The folder tells names apart by case: a listed name with its case changed is not there
    (True for an empty folder: nothing to find whatever the case)."""
    for name in names:
        other = name.swapcase()
        if other != name and name.isascii():
            return other in names or lstat_or_none(os.path.join(folder, other)) is None
    return not names


def nothing_there(plan, leftovers) -> bool:
    """The same, with three ``lstat``s and the run's listing of temp names (``LeftoverScan``)."""
    state = state_path(plan.final)
    if lstat_or_none(plan.final) is not None or lstat_or_none(part_path(plan.final)) is not None:
        return False
    if lstat_or_none(state) is not None or lstat_or_none(beside_lock_path(plan.final)) is not None:
        return False
    prefix = f".{state.name}."
    return not any(name.startswith(prefix) for name in leftovers.names(plan.final.parent))
