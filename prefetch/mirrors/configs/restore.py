"""Putting a backup back: every copy checked first, then each file as it was before ``use``.

A file the user edited after ``use`` wrote it (an ``extra-index-url``, a trusted host, a line
in ``~/.bashrc``) keeps those edits: only ``use``'s own change is undone, as a three-way merge
of what ``use`` wrote (the base), the copy from before ``use`` and the file now. When the
edit touches the lines ``use`` wrote (or the result would not load), the file goes back byte
for byte and the result names the lines that were dropped and where the edited file is saved.

A link ``use`` wrote through (a dotfile manager's) that the user re-pointed since, or replaced, is
theirs: it is left alone, and ``use``'s change is undone in the file it changed, the link's old
target (``changed_file``). A link made where ``use`` wrote a file is left alone too.
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from prefetch.errors import LocalFileError, UnsafePathError
from prefetch.mirrors.configs.backup import (
    Backup,
    FileBackup,
    check_config_target,
    create_backup,
    read_state,
    write_atomic,
    write_meta,
)


@dataclass(frozen=True)
class RestoredFile:
    """What a restore did to one file."""

    path: Path
    action: str  # "restored", "removed", "absent", "merged" (as before `use`, plus the user's later edits), or "left"
    kept: tuple[str, ...] = ()  # "merged": the user's lines kept
    dropped: tuple[str, ...] = ()  # "restored"/"removed": the user's later lines it took away
    edited_copy: Path | None = None  # where the file as the user left it is saved (when edited)
    changed: Path | None = None  # the file put back when it is not what ``path`` leads to now (a re-pointed link's old target)
    note: str = ""  # why ``path`` itself was left alone


@dataclass(frozen=True)
class RestoreResult:
    """One backup put back, and the safety backup made of what it replaced."""

    backup: Backup
    files: tuple[RestoredFile, ...]
    safety_backup: Backup


def load_backup(backup: Backup) -> dict[Path, bytes]:
    """Every saved copy in ``backup``, read and checked, before anything is put back.

    Raises:
        LocalFileError: a copy is missing or unreadable (nothing has been changed).
        IntegrityError: a copy no longer matches the checksum taken when it was saved.
    """
    from prefetch.errors import IntegrityError

    blobs = {}
    for item in backup.files:
        if not item.existed:
            continue
        try:
            data = read_state(backup.directory / str(item.blob))  # a link there: refused, never followed
            if data is None:
                raise FileNotFoundError(2, "No such file or directory")
        except (OSError, UnsafePathError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise LocalFileError(
                f"backup {backup.id} is missing its copy of {item.path}: {why};"
                " nothing was restored (`prefetch mirror restore --list` shows other backups)"
            ) from None
        if item.sha256 is not None and hashlib.sha256(data).hexdigest() != item.sha256:
            raise IntegrityError(
                f"backup {backup.id}'s copy of {item.path} was changed after it was saved (checksum differs);"
                " nothing was restored (`prefetch mirror restore --list` shows other backups)"
            )
        blobs[Path(item.path)] = data
    return blobs


def _read_or_none(path: Path) -> bytes | None:
    from prefetch.fs.safefs import read_file

    try:
        return read_file(path)
    except (OSError, UnsafePathError):
        return None


def _written(backup: Backup, item: FileBackup) -> bytes | None:
    """What ``use`` wrote to ``item``, when its copy is there and unchanged."""
    if not (item.written_blob and item.written_sha256):
        return None
    try:
        data = read_state(backup.directory / item.written_blob)
    except (OSError, UnsafePathError):
        data = None
    return data if data is not None and hashlib.sha256(data).hexdigest() == item.written_sha256 else None


def undo_edit(written: str, original: str, current: str) -> str | None:
    """``current`` with the change ``original`` -> ``written`` taken back, or None when it cannot be.

    It cannot when a line that change wrote (or a line beside an insertion) was edited since.
    """
    w, o, c = (text.splitlines(keepends=True) for text in (written, original, current))
    same: dict[int, int] = {}  # a line of `written` -> the same line, untouched, in `current`
    for tag, i1, i2, j1, _ in difflib.SequenceMatcher(None, w, c, autojunk=False).get_opcodes():
        if tag == "equal":
            same.update({i1 + k: j1 + k for k in range(i2 - i1)})
    edits = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, w, o, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if i1 < i2:
            if any(k not in same for k in range(i1, i2)) or same[i2 - 1] - same[i1] != i2 - 1 - i1:
                return None  # the user changed a line `use` wrote
            start, end = same[i1], same[i2 - 1] + 1
        else:  # `use` deleted lines here: put them back between the same neighbours
            before = same.get(i1 - 1) if i1 > 0 else -1
            after = same.get(i1) if i1 < len(w) else len(c)
            if before is None or after is None or after != before + 1:
                return None
            start = end = after
        edits.append((start, end, o[j1:j2]))
    newline = "\r\n" if "\r\n" in current else "\n"
    result = list(c)
    for start, end, lines in reversed(edits):
        if lines and not lines[-1].endswith(("\n", "\r")) and end < len(result):
            lines = [*lines[:-1], lines[-1] + newline]  # a last line without its newline, now followed by more
        if lines and 0 < start and not result[start - 1].endswith(("\n", "\r")):
            result[start - 1] += newline
        result[start:end] = lines
    return "".join(result)


def _loads(path: Path, text: str) -> bool:
    """Whether the tool that reads ``path`` can still load ``text``."""
    if path.name in ("pip.conf", "pip.ini"):
        from prefetch.mirrors.configs.ini import pip_parse_error

        return pip_parse_error(text) is None
    if path.suffix == ".toml":
        import tomllib

        try:
            tomllib.loads(text.removeprefix("\ufeff"))
        except tomllib.TOMLDecodeError:
            return False
    return True


def _keep_section(written: str, merged: str, path: Path) -> str:
    """A pip.conf ``use`` created, with the user's keys added under its ``[global]``: the header stays.

    (Taking it away would leave keys before any section, which pip cannot load.)"""
    first = written.splitlines(keepends=True)[:1]
    if path.name in ("pip.conf", "pip.ini") and first and first[0].strip() == "[global]":
        return first[0] + merged
    return merged


def _user_lines(written: bytes, current: bytes) -> tuple[str, ...]:
    """The lines in ``current`` that ``use`` did not write (the user's edit), stripped."""
    new = current.decode("utf-8", "replace").splitlines()
    old = written.decode("utf-8", "replace").splitlines()
    return tuple(line[2:].strip() for line in difflib.ndiff(old, new) if line.startswith("+ ") and line[2:].strip())


def changed_file(item: FileBackup) -> tuple[Path | None, str]:
    """The file ``use`` changed for ``item`` (None: none of it is left to undo), and, when that is
    not simply ``item.path``, one line on what ``item.path`` is now and that it is left alone.

    ``item.path`` itself while it is what ``use`` saw: a file, or the link ``use`` wrote through.
    A link re-pointed since (or replaced by a file, or removed) is the user's: the file ``use``
    changed is the link's old target, put back where it still is a file. A link made where ``use``
    wrote a file is the user's too, and what ``use`` changed was replaced with it."""
    import os
    import stat

    from prefetch.fs.safefs import lstat_or_none

    path = Path(item.path)
    st = lstat_or_none(path)
    now = os.readlink(path) if st is not None and stat.S_ISLNK(st.st_mode) else None
    if item.link is None:
        if now is None:
            return path, ""
        return None, f"{path} is a link to {now} made after `mirror use` wrote a file there: left alone"
    if item.target is None:  # (a backup from before targets were recorded: the link's text tells)
        target = Path(os.path.normpath(os.path.join(path.parent, item.link)))
        same = now == item.link
    else:  # (a folder on the way re-pointed, with the link's text unchanged, leads elsewhere too)
        target = Path(item.target)
        same = now is not None and os.path.realpath(path) == item.target
    if same:
        return path, ""  # the link `use` wrote through
    now_is = (f"a link to {now} now" if now is not None else "a file of yours now" if st is not None
              else "gone now")
    kept = lstat_or_none(target)
    if kept is None or not stat.S_ISREG(kept.st_mode):
        return None, (f"{path} is left alone ({now_is}); {target}, the file `mirror use` changed through it, is "
                      + ("gone: nothing to put back" if kept is None else "not a file now: left alone too"))
    return target, f"`mirror use` wrote it through the link {path}, {now_is}: left alone"


def _plan_file(
    backup: Backup, item: FileBackup, blobs: dict[Path, bytes], ours: frozenset[str] = frozenset(),
    where: Path | None = None,
) -> tuple[str, bytes | None, tuple, tuple]:
    """(action, bytes to write or None to remove, kept lines, dropped lines) for one file.

    ``ours``: hashes of what any ``use`` wrote: a later ``use`` 's file is no user edit.
    ``where``: the file to put back (``changed_file``), ``item.path`` by default."""
    plain = ("restored", blobs[Path(item.path)]) if item.existed else ("removed", None)
    current = _read_or_none(Path(item.path) if where is None else where)
    now = hashlib.sha256(current).hexdigest() if current is not None else None
    if now is None or item.written_sha256 is None or now == item.written_sha256 or now in ours:
        return (*plain, (), ())  # as a `use` left it (or gone, or a backup from before this was recorded)
    written = _written(backup, item)
    if written is None:
        return (*plain, (), ("which lines is unknown: the copy of what `use` wrote is missing or changed",))
    mine = _user_lines(written, current)
    try:
        merged = undo_edit(written.decode("utf-8"), (plain[1] or b"").decode("utf-8"), current.decode("utf-8"))
    except UnicodeDecodeError:
        merged = None
    if merged is not None and not item.existed and not _loads(Path(item.path), merged):
        merged = _keep_section(written.decode("utf-8"), merged, Path(item.path))
    if merged is None or not _loads(Path(item.path), merged):
        return (*plain, (), mine)
    if not item.existed and not merged.strip():
        return ("removed", None, (), ())
    return ("merged", merged.encode("utf-8"), mine, ())


def _remove(item: FileBackup, where: Path) -> None:
    """Take away the file ``use`` created at ``where`` (``changed_file``). Through a link that was
    there before ``use`` (a dotfile manager's, to a file not made yet) that is the file at the
    link's target: the link stays, dangling again, as it was."""
    import os

    path = where
    if item.link is not None:
        from prefetch.fs.safefs import check_replaceable

        if path.is_symlink():
            path = Path(os.path.realpath(path))
        check_replaceable(path)  # (a link there, another account's file: refused, never removed)
    path.unlink()


def check_restorable(backup: Backup) -> None:
    """Refuse (before any write) a file to put back that is not ours to change (``check_config_target``)."""
    for item in backup.files:
        where = changed_file(item)[0]
        if item.existed and where is not None:
            check_config_target(where)


def restore_backup(
    backup: Backup, *, root: Path, operation: str, blobs: dict[Path, bytes] | None = None,
    ours: frozenset[str] = frozenset(),
) -> RestoreResult:
    """Put ``backup``'s files back; remove files that did not exist (keeping the user's later edits).

    Every saved copy is read and checked first (``blobs``: already done by the caller),
    so a missing or altered copy changes no file. The current files are saved first
    (kind ``pre-restore``), so a restore can be undone by restoring that backup by name.
    ``ours``: the ``written_sha256`` of every backup (a file a later ``use`` wrote is not the user's edit).

    Raises:
        LocalFileError: a file cannot be written or removed, or a blob is missing.
        IntegrityError: a blob was altered.
    """
    blobs = load_backup(backup) if blobs is None else blobs
    check_restorable(backup)
    wheres = [changed_file(item) for item in backup.files]
    plans = [_plan_file(backup, item, blobs, ours, where) for item, (where, _) in zip(backup.files, wheres)
             if where is not None]
    paths = [where for where, _ in wheres if where is not None]
    safety = create_backup(
        paths, tool=backup.tool, root=root, mirror=backup.mirror, operation=operation, kind="pre-restore"
    )
    saved = {Path(f.path): safety.directory / f.blob for f in safety.files if f.blob}
    results = []
    planned = iter(plans)
    for item, (where, note) in zip(backup.files, wheres):
        if where is None:
            results.append(RestoredFile(path=item.path, action="left", note=note))
            continue
        action, data, kept, dropped = next(planned)
        copy = saved.get(where) if (kept or dropped) else None
        if data is not None:
            write_atomic(where, data)
        else:
            try:
                _remove(item, where)
            except FileNotFoundError:
                action = "absent"
            except OSError as exc:
                raise LocalFileError(f"cannot remove {where}: {exc.strerror or exc}") from None
        results.append(RestoredFile(path=item.path, action=action, kept=kept, dropped=dropped, edited_copy=copy,
                                    changed=where if where != Path(item.path) else None, note=note))
    done = replace(backup, restored=datetime.now(timezone.utc).isoformat())
    write_meta(done)
    return RestoreResult(backup=done, files=tuple(results), safety_backup=safety)
