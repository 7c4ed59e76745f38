"""Another account's extraction, read as it is: a shared cache (nltk_data, a team folder) that
the first account filled and a second one may read but not write. The second account has no
marker of that extraction (markers live in each account's own state), and extracting again
would need to write into the other account's folder (exit 5 before, though every file was in
place). The tree is taken as present when the folder is not ours to write, the archive is the
verified one, and every member of the archive is there as the archive lists it: a regular file
of the member's size (never a link), or a folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from prefetch.model.plans import FilePlan


def foreign_tree_entries(plan: FilePlan, archive: Path, into: Path) -> list[str]:
    """The archive's top-level entries when all of it is in place in ``into``, a folder this
    account cannot write (else []: extract as usual)."""
    if plan.spec.expected is None or plan.extract_moves or plan.extract_gunzip or plan.extract_subfolder:
        return []
    try:
        st = os.stat(into)
        if not stat.S_ISDIR(st.st_mode) or os.access(into, os.W_OK) or st.st_uid == os.geteuid():
            return []
        members = _members(archive)
    except (OSError, ValueError, EOFError, RuntimeError):
        return []
    tops: list[str] = []
    for name, is_dir, size in members:
        parts = PurePosixPath(name).parts
        if not parts or parts[0] in ("/", "..") or ".." in parts:
            return []
        try:
            found = os.lstat(into.joinpath(*parts))
        except OSError:
            return []
        if is_dir != stat.S_ISDIR(found.st_mode) or (not is_dir and (not stat.S_ISREG(found.st_mode)
                                                                      or found.st_size != size)):
            return []
        if parts[0] not in tops:
            tops.append(parts[0])
    return tops if not plan.extract_top or tops == [plan.extract_top] else []  # (an NLTK package: its own folder)


def _members(archive: Path) -> list[tuple[str, bool, int]]:
    """(name, is a folder, size) of every member; a link or special member: ValueError."""
    import zipfile

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            return [(i.filename.rstrip("/"), i.is_dir(), i.file_size) for i in zf.infolist()]
    import tarfile

    found = []
    with tarfile.open(archive, "r:*") as tar:
        for m in tar:
            if not (m.isreg() or m.isdir()):
                raise ValueError(f"{m.name}: not a file or folder")
            found.append((m.name.rstrip("/"), m.isdir(), m.size))
    return found
