"""Placing an extraction: the destination, a temp dir beside it, and the rename into place."""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from pathlib import Path

from prefetch.errors import LocalFileError
from prefetch.fs.safefs import remove_tree


def _resolve_destination(destination: Path, *, archive: Path) -> Path:
    """Return where the contents go: ``destination``, or its target if it is a symlink to a dir.

    Only a link we (or root) made is followed: one another user planted in a shared
    cache is refused (``UnsafePathError``), as is a destination another user owns.
    """
    from prefetch.fs import safefs

    safefs.check_dir_chain(destination)
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


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)  # not thread-safe, hence only where /proc is missing
    os.umask(old)
    return old


def _make_temp_dir(parent: Path, name: str) -> tuple[Path, int]:
    """Create a private temp dir; return it and the mode a normal mkdir would have given it.

    Created 0700 in one step (a shared directory never sees it open), with a random
    name that ``mkdir`` refuses if anything, a planted link included, is already there.
    """
    mode = 0o777 & ~_umask()
    for _ in range(100):
        path = parent / f".{name}.extract-{secrets.token_hex(4)}"
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path, mode
    raise LocalFileError(f"cannot create a temporary directory in {parent}")  # pragma: no cover


def _set_dir_mode(path: Path, mode: int) -> None:
    """chmod our temp dir through an fd opened without following links."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


# Names of prefetch's own in-flight files: an archive member may never replace one.
_OWN_SUFFIXES = (".part", ".part.json")
_OWN_TEMP = re.compile(r"^\..*(\.tmp|\.extract-[0-9a-f]+|\.old-[0-9a-f]+)$")


def _check_entries(temp: Path, final: Path, *, archive: Path, protect: frozenset[Path]) -> list[str]:
    """The top-level names to move from ``temp`` into ``final``, refusing any that would
    replace the archive itself, its partial or state, or another of prefetch's own files."""
    from prefetch.errors import UnsafeArchiveError

    names = sorted(os.listdir(temp))
    for name in names:
        target = Path(os.path.realpath(final)) / name
        if target in protect or name.endswith(_OWN_SUFFIXES) or _OWN_TEMP.match(name):
            raise UnsafeArchiveError(
                f"unsafe archive {archive}: its member {name!r} would replace {target}, one of prefetch's "
                "own files (the archive, its partial download or state, a lock or a temp file); refusing "
                "to extract it. Nothing was extracted; do not trust this source."
            )
    return names


def _install(temp: Path, final: Path, *, archive: Path | None = None, protect: frozenset[Path] = frozenset(),
             merge: bool = False) -> None:
    names = _check_entries(temp, final, archive=archive or temp, protect=protect)
    if not os.path.lexists(final):
        try:
            os.rename(temp, final)
            return
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            # Someone created it meanwhile: fall through and merge into it.
    if merge:
        _check_merge(temp, final, names, archive=archive or temp, protect=protect)
    for name in names:
        (_merge_entry if merge else _replace_entry)(temp / name, final / name)


def _check_merge(temp: Path, final: Path, names: list[str], *, archive: Path, protect: frozenset[Path]) -> None:
    """Before a merge moves anything: no entry at any depth it reaches may replace one of
    prefetch's own files (``_check_entries``, level by level where both sides are directories)."""
    for name in names:
        new, target = temp / name, final / name
        if os.path.isdir(target) and not os.path.islink(target) and stat.S_ISDIR(os.lstat(new).st_mode):
            _check_merge(new, target, _check_entries(new, target, archive=archive, protect=protect),
                         archive=archive, protect=protect)


def _merge_entry(new: Path, target: Path) -> None:
    """``new`` into ``target`` as tar extraction does: a directory of ours already there is
    descended into (what it holds that the archive does not is kept); anything else is
    replaced as ``_replace_entry`` does (never through a link: only real directories merge)."""
    from prefetch.fs import safefs

    old = safefs.lstat_or_none(target)
    if (old is None or safefs.is_foreign(old) or not stat.S_ISDIR(old.st_mode)
            or not stat.S_ISDIR(os.lstat(new).st_mode)):
        _replace_entry(new, target)
        return
    for name in sorted(os.listdir(new)):
        _merge_entry(new / name, target / name)


def _replace_entry(new: Path, target: Path) -> None:
    """Put ``new`` at ``target`` so that ``target`` is always a complete old or new tree.

    The old entry is renamed aside and deleted only if it is ours: another user's
    file, directory or planted link there is refused (``UnsafePathError``).
    """
    from prefetch.fs import safefs

    try:
        old = os.lstat(target)
    except FileNotFoundError:
        os.rename(new, target)
        return
    if safefs.is_foreign(old):
        raise safefs.refuse(target, f"it belongs to another user (uid {old.st_uid}) and would be replaced "
                                    "by the extraction")
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
