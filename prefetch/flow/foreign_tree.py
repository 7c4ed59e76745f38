"""Another account's extraction, read as it is: a shared cache (nltk_data, a team folder) that
the first account filled and a second one may read but not write. The second account has no
marker of that extraction (markers live in each account's own state), and extracting again
would need to write into the other account's folder (exit 5 before, though every file was in
place). The tree is taken as present when the folder is not ours to write, the archive is the
verified one, and every member of the archive is there as it is in the archive: a regular file
with the member's bytes (never a link), or a folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from prefetch.model.plans import FilePlan


def foreign_tree_entries(plan: FilePlan, archive: Path, into: Path) -> list[str]:
    """The archive's top-level entries when all of it is in place in ``into``, a folder this
    account cannot write (else []: extract as usual). Every file is compared byte for byte with
    its member (sizes and names alone would take a tree a hostile account planted in a shared
    folder): as costly as one extraction, without its writes."""
    if plan.spec.expected is None or plan.extract_moves or plan.extract_gunzip or plan.extract_subfolder:
        return []
    try:
        st = os.stat(into)
        if not stat.S_ISDIR(st.st_mode) or os.access(into, os.W_OK) or st.st_uid == os.geteuid():
            return []
        tops = _compare(archive, into)
    except (OSError, ValueError, EOFError, RuntimeError, LookupError):
        return []
    return tops if tops and (not plan.extract_top or tops == [plan.extract_top]) else []  # (NLTK: its own folder)


def _compare(archive: Path, into: Path) -> list[str]:
    """The top-level entries of ``archive`` if ``into`` holds every member as it is (a regular
    file with the member's bytes, never a link, or a folder); else []."""
    import zipfile

    tops: list[str] = []

    def same(name: str, is_dir: bool, size: int, open_member) -> bool:
        parts = PurePosixPath(name.rstrip("/")).parts
        if not parts or parts[0] in ("/", "..") or ".." in parts:
            return False
        path = into.joinpath(*parts)
        found = os.lstat(path)
        if parts[0] not in tops:
            tops.append(parts[0])
        if is_dir:
            return stat.S_ISDIR(found.st_mode)
        if not stat.S_ISREG(found.st_mode) or found.st_size != size:
            return False
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # (never through a link, never a FIFO)
        with open_member() as member, os.fdopen(fd, "rb") as placed:
            while True:
                chunk = member.read(1 << 20)
                if chunk != placed.read(len(chunk) if chunk else 1):
                    return False
                if not chunk:
                    return True

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            ok = all(same(i.filename, i.is_dir(), i.file_size, lambda i=i: zf.open(i)) for i in zf.infolist())
        return tops if ok else []
    import tarfile

    with tarfile.open(archive, "r:*") as tar:
        for m in tar:
            if not (m.isreg() or m.isdir()) or not same(m.name, m.isdir(), m.size, lambda m=m: tar.extractfile(m)):
                return []
    return tops
