"""What some readers do to an archive's tree right after extracting it, done in the private
temp dir before anything is placed (so the result is still complete or absent).

torchvision's dataset classes are the users: INaturalist renames ``train/`` to
``2021_train/``, Places365 ``data_large/`` to ``data_large_standard/``, SBDataset moves
``benchmark_RELEASE/dataset/cls`` (and four more) up to the root, and EMNIST decompresses
every ``gzip/*.gz`` beside the folder and then deletes the folder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Sequence

from prefetch.errors import IntegrityError, UsageError
from prefetch.fs.safefs import remove_tree


def check_relative(rel: str) -> str:
    """``rel`` if it is a plain relative path (``/``-separated, no ``..``, not absolute).

    Raises:
        UsageError: it is not.
    """
    parts = PurePosixPath(rel).parts
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel or ".." in parts or "." in parts:
        raise UsageError(f"{rel!r} must be a relative path inside the archive")
    return rel


def _inside(temp: Path, rel: str, archive: Path) -> Path:
    """``temp/rel``, refusing a path that goes through a symbolic link the archive made."""
    path = temp
    for part in PurePosixPath(check_relative(rel)).parts[:-1]:
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            break
        if not stat.S_ISDIR(st.st_mode):
            raise IntegrityError(f"{archive}: {rel!r} goes through {part!r}, which is not a directory")
    return temp / rel


def rearrange(temp: Path, *, archive: Path, moves: Sequence[tuple[str, str]] = (),
              gunzip: str | None = None, stop=None) -> None:
    """Apply ``moves`` (``from`` -> ``to``, paths relative to the extracted tree, in order), then
    decompress each ``gunzip/*.gz`` (and ``.xz``) to the tree's top and remove ``gunzip``.

    Raises:
        IntegrityError: the archive lacks a path to move or the folder to decompress, or a
            move would replace something it holds.
        UnsafeArchiveError: a member decompresses like a bomb.
        InterruptedTransferError: ``stop`` (a ``threading.Event``) was set while decompressing.
    """
    for src, dst in moves:
        old, new = _inside(temp, src, archive), _inside(temp, dst, archive)
        if not os.path.lexists(old):
            raise IntegrityError(f"{archive}: holds no {src!r} to move to {dst!r}; is it the right archive?")
        if os.path.lexists(new):
            raise IntegrityError(f"{archive}: moving {src!r} to {dst!r} would replace what the archive holds there")
        new.parent.mkdir(parents=True, exist_ok=True)
        os.rename(old, new)
    if gunzip is None:
        return
    from prefetch.archive.gunzip import decompress_gzip

    folder = _inside(temp, gunzip, archive)
    st = os.lstat(folder) if os.path.lexists(folder) else None
    if st is None or not stat.S_ISDIR(st.st_mode):
        raise IntegrityError(f"{archive}: holds no folder {gunzip!r} of .gz files")
    for name in sorted(os.listdir(folder)):
        member = folder / name
        if name.endswith((".gz", ".xz")) and stat.S_ISREG(os.lstat(member).st_mode):
            target = temp / name[:-3]
            if os.path.lexists(target):
                raise IntegrityError(f"{archive}: {gunzip}/{name} and {name[:-3]} would have the same name")
            decompress_gzip(member, target, stop=stop)
    remove_tree(folder)
