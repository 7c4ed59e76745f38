"""Placing an extraction: the destination, a temp dir beside it, and the rename into place."""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from prefetch.errors import LocalFileError
from prefetch.fsutil import remove_tree


def _resolve_destination(destination: Path, *, archive: Path) -> Path:
    """Return where the contents go: ``destination``, or its target if it is a symlink to a dir."""
    if os.path.islink(destination) and os.path.isdir(destination):
        return Path(os.path.realpath(destination))
    if os.path.lexists(destination) and not os.path.isdir(destination):
        raise LocalFileError(
            f"cannot extract {archive} into {destination}: it exists and is not a directory; move it away or "
            "choose another destination."
        )
    return destination


def _staging_parent(final: Path) -> Path:
    """Where the temp dir goes: beside the target, or inside it if it is a mount point."""
    if os.path.isdir(final):
        parent = final.parent
        if os.stat(final).st_dev != os.stat(parent).st_dev:
            return final  # a rename from beside a mount point would cross filesystems
        return parent
    final.parent.mkdir(parents=True, exist_ok=True)
    return final.parent


def _make_temp_dir(parent: Path, name: str) -> tuple[Path, int]:
    """Create a private temp dir; return it and the mode a normal mkdir would have given it."""
    for _ in range(100):
        path = parent / f".{name}.extract-{secrets.token_hex(4)}"
        try:
            os.mkdir(path, 0o777)  # the umask decides the mode it keeps once renamed into place
        except FileExistsError:
            continue
        mode = stat.S_IMODE(os.stat(path).st_mode)
        os.chmod(path, 0o700)  # private while members are written into it
        return path, mode
    raise LocalFileError(f"cannot create a temporary directory in {parent}")  # pragma: no cover


def _install(temp: Path, final: Path) -> None:
    if not os.path.lexists(final):
        try:
            os.rename(temp, final)
            return
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            # Someone created it meanwhile: fall through and merge into it.
    for name in sorted(os.listdir(temp)):
        _replace_entry(temp / name, final / name)


def _replace_entry(new: Path, target: Path) -> None:
    """Put ``new`` at ``target`` so that ``target`` is always a complete old or new tree."""
    try:
        old = os.lstat(target)
    except FileNotFoundError:
        os.rename(new, target)
        return
    if not stat.S_ISDIR(old.st_mode) and not stat.S_ISDIR(os.lstat(new).st_mode):
        os.replace(new, target)  # one atomic step for files and links
        return
    aside = target.with_name(f".{target.name}.old-{secrets.token_hex(4)}")
    os.rename(target, aside)
    try:
        os.rename(new, target)
    except BaseException:
        os.rename(aside, target)
        raise
    remove_tree(aside)

