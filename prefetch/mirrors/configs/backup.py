"""Timestamped backups of tool config files, atomic writes, and byte-exact restore.

A backup is a directory ``<state dir>/backups/<tool>-<UTC stamp>/`` holding
``meta.json`` (which files, whether each existed, which mirror, which operation)
and one blob per file that existed. ``restore`` writes the blobs back byte for
byte and deletes files that did not exist before (``restore.py``; a file the user
edited after ``use`` keeps those edits where they do not touch prefetch's change).
Backups made by one ``mirror use`` run share an operation id, so a bare ``mirror
restore`` undoes that whole run; each restore marks its backups restored, so
repeating ``restore`` walks back through earlier runs. A backup whose edit was never written (a
read-only folder, a full disk) is taken away again (``discard_unapplied``).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from prefetch.errors import LocalFileError, UsageError

META = "meta.json"


class NoBackupError(UsageError):
    """There is no backup matching the request."""


@dataclass(frozen=True)
class FileBackup:
    """One config file as it was before a write."""

    path: Path
    existed: bool
    blob: str | None  # file name inside the backup directory when it existed
    sha256: str | None = None  # of the blob (None in backups made before it was recorded)
    written_sha256: str | None = None  # of what `use` wrote there (None: a pre-restore copy, or older)
    written_blob: str | None = None  # a copy of what `use` wrote, the base for keeping later edits
    link: str | None = None  # the path was a symbolic link (a dotfile manager's): its text, dangling or not
    target: str | None = None  # ... and the file it led to, links resolved: the file `use` changed


@dataclass(frozen=True)
class Backup:
    """A set of files saved before one tool's config was changed."""

    id: str
    tool: str
    created: str  # ISO 8601, UTC
    operation: str  # shared by the backups of one `mirror use` run
    mirror: str
    kind: str  # "use" (before a write) or "pre-restore" (before a restore)
    files: tuple[FileBackup, ...]
    directory: Path
    restored: str | None = None  # when it was restored, if it was


def backups_root(state_dir: Path) -> Path:
    """The directory holding all backups."""
    return Path(state_dir) / "backups"


def new_operation_id() -> str:
    """An id grouping the backups of one command run."""
    return secrets.token_hex(6)


def read_text_file(path: Path) -> str | None:
    """Return the file's text (newlines untouched), or None when it does not exist.

    Raises:
        LocalFileError: it exists but cannot be read or is not UTF-8.
    """
    from prefetch.fs.safefs import read_file

    try:
        data = read_file(path)  # a FIFO or device there: UnsafePathError, never a hang
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LocalFileError(f"cannot read {path}: {exc.strerror or exc}; check its permissions") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise LocalFileError(
            f"{path} is not UTF-8 text; prefetch will not edit it (fix or move it, then retry)"
        ) from None


def check_config_target(path: Path) -> None:
    """Refuse to replace a config that is not ours to change.

    A config that belongs to another user (itself, or the file its symlink points to),
    a symlink another user planted, something other than a regular file, or a file
    whose owner took away its write bit (``chmod a-w``: locked on purpose) is left
    alone: replacing it would hand it to us (owner and all) or undo a lock. Our own
    symlink to our own file (a dotfile manager's) is fine and stays a link.

    Raises:
        UnsafePathError: another user's file or link, or not a regular file.
        LocalFileError: a read-only file.
    """
    import stat as statmod

    from prefetch.errors import UnsafePathError
    from prefetch.fs import safefs

    st = safefs.lstat_or_none(path)
    if st is None:
        return
    shown = str(path)
    if statmod.S_ISLNK(st.st_mode):
        safefs.check_link_ok(path)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return  # a dangling link of ours: writing creates its target
        except OSError as exc:
            raise LocalFileError(f"cannot follow {path}: {exc.strerror or exc}") from None
        shown = f"{path} (a link to {os.path.realpath(path)})"
    if not statmod.S_ISREG(st.st_mode):
        raise safefs.refuse(path, f"it is {safefs.kind_of(st)}")
    if safefs.is_foreign(st):
        raise UnsafePathError(
            f"refusing to change {shown}: it belongs to another user (uid {st.st_uid}) and replacing it"
            " would make it ours; ask its owner, or write your own file (remove the link, or use another --scope)"
        )
    if not st.st_mode & statmod.S_IWUSR:
        raise LocalFileError(
            f"refusing to change {shown}: it is read-only (mode {statmod.S_IMODE(st.st_mode):04o}), locked by"
            f" its owner; `chmod u+w {path}` to allow prefetch to edit it, then run the command again"
        )


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step (temp file beside it + ``os.replace``).

    A symlinked config (dotfile managers) is followed, so the link stays a link.
    The file keeps its permission bits. What ``check_config_target`` refuses is left alone.

    Raises:
        LocalFileError: the directory or file cannot be written, or is not ours to change.
    """
    from prefetch.fs.files import replace_file

    check_config_target(path)
    target = Path(os.path.realpath(path))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = target.stat().st_mode & 0o7777 if target.exists() else None
        replace_file(target, data, durable=True, mode=mode)
    except OSError as exc:
        import errno

        if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # (the file is as it was: the new one is a temp file)
            raise LocalFileError(f"cannot write {path}: {exc.strerror}; free some space on its disk and run "
                                 f"the command again (the file is unchanged)") from None
        raise LocalFileError(
            f"cannot write {path}: {exc.strerror or exc}; check permissions (or use --scope user)"
        ) from None


def create_backup(
    paths: list[Path], *, tool: str, root: Path, mirror: str, operation: str, kind: str = "use",
    written: dict[Path, bytes] | None = None,
) -> Backup:
    """Save the current bytes of ``paths`` (or that they do not exist) under ``root``.

    ``written``: what ``use`` is about to write to each path, kept beside the copy so that a
    restore can tell (and keep) what the user changed after the write.

    Raises:
        LocalFileError: the backup cannot be written.
    """
    now = datetime.now(timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%S") + f".{now.microsecond:06d}Z"
    directory = Path(root) / f"{tool}-{stamp}"
    suffix = 1
    while directory.exists():
        suffix += 1
        directory = Path(root) / f"{tool}-{stamp}-{suffix}"
    from prefetch.fs.safefs import write_new

    files = []
    made_root = not Path(root).is_dir()  # (the first backup: the root's name is new too)
    try:
        directory.mkdir(parents=True)
        for index, path in enumerate(paths):
            path = Path(path)
            new = (written or {}).get(path)
            mark = {"link": os.readlink(path), "target": os.path.realpath(path)} if path.is_symlink() else {}
            if new is not None:
                write_new(directory / f"{index}-{path.name}.written", new, mode=0o600, durable=True)
                mark.update(written_sha256=hashlib.sha256(new).hexdigest(), written_blob=f"{index}-{path.name}.written")
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                files.append(FileBackup(path=path, existed=False, blob=None, **mark))
                continue
            blob = f"{index}-{path.name}"
            # On disk before meta.json and the new config are (both fsynced): after a crash (a VM
            # preempted) the copy is there, not an empty file that restore must refuse. The owner's
            # alone (0600): a config can hold a credential (a private index's token) its owner
            # keeps from other accounts, and this folder is 0755.
            write_new(directory / blob, data, mode=0o600, durable=True)
            files.append(FileBackup(path=path, existed=True, blob=blob, sha256=hashlib.sha256(data).hexdigest(), **mark))
    except OSError as exc:
        raise LocalFileError(f"cannot back up to {directory}: {exc.strerror or exc}") from None
    backup = Backup(
        id=directory.name,
        tool=tool,
        created=now.isoformat(),
        operation=operation,
        mirror=mirror,
        kind=kind,
        files=tuple(files),
        directory=directory,
    )
    write_meta(backup)
    # The names on disk too, before the new config is: after a crash (a VM preempted) the backup
    # is found under its name, not lost while the config it saved was replaced.
    from prefetch.fs.files import sync_dir

    sync_dir(directory)  # its copies and meta.json
    sync_dir(directory.parent)  # the backup's own name
    if made_root:
        sync_dir(directory.parent.parent)
    return backup


def discard_unapplied(backup: Backup) -> bool:
    """Take ``backup`` away when every file it saved is still as saved: the edit it was made for
    was never written (a read-only folder, a full disk, a Ctrl-C before the write), and ``restore``
    would otherwise undo that nothing instead of the last ``use`` that wrote. True when it did."""
    import shutil

    from prefetch.fs.safefs import read_file

    for item in backup.files:
        try:
            now = hashlib.sha256(read_file(item.path)).hexdigest()
        except FileNotFoundError:
            now = None
        except (OSError, LocalFileError):  # (UnsafePathError: a FIFO there now) kept: restore decides
            return False
        if now != (item.sha256 if item.existed else None):
            return False
    shutil.rmtree(backup.directory, ignore_errors=True)
    return True


def write_meta(backup: Backup) -> None:
    meta = {
        "id": backup.id,
        "tool": backup.tool,
        "created": backup.created,
        "operation": backup.operation,
        "mirror": backup.mirror,
        "kind": backup.kind,
        "restored": backup.restored,
        "files": [
            {"path": str(f.path), "existed": f.existed, "blob": f.blob, "sha256": f.sha256,
             "written_sha256": f.written_sha256, "written_blob": f.written_blob, "link": f.link, "target": f.target}
            for f in backup.files
        ],
    }
    write_state(backup.directory / META, (json.dumps(meta, indent=2) + "\n").encode())


def write_state(path: Path, data: bytes) -> None:
    """Replace one of prefetch's own files (a backup's ``meta.json``, the marks) in one step.

    Unlike a config, it is never a link prefetch made: a link or another account's file there
    is refused (``UnsafePathError``), never written through.

    Raises:
        UnsafePathError: a link, non-regular or foreign file at ``path``.
        LocalFileError: it cannot be written.
    """
    from prefetch.fs.files import replace_file

    try:
        replace_file(Path(path), data, durable=True, checked=True)
    except OSError as exc:
        raise LocalFileError(f"cannot write {path}: {exc.strerror or exc}; check its directory's permissions") from None


def read_state(path: Path) -> bytes | None:
    """One of prefetch's own files, or None when absent (``UnsafePathError``: a link, or not ours)."""
    from prefetch.fs.safefs import read_bytes

    return read_bytes(path, own=True)


def unreadable_backups(root: Path) -> list[Path]:
    """Backup directories whose ``meta.json`` is missing, not JSON, a link or not ours."""
    try:
        entries = sorted(Path(root).iterdir())
    except OSError:
        return []
    return [d for d in entries if d.is_dir() and _read_meta(d) is None]


def list_backups(root: Path, *, tool: str | None = None) -> list[Backup]:
    """All readable backups under ``root``, newest first (optionally one tool's)."""
    found = []
    try:
        entries = list(Path(root).iterdir())
    except OSError:
        return []
    for directory in entries:
        backup = _read_meta(directory)
        if backup is not None and (tool is None or backup.tool == tool):
            found.append(backup)
    found.sort(key=lambda b: (b.created, b.id), reverse=True)
    return found


def _read_meta(directory: Path) -> Backup | None:
    from prefetch.errors import UnsafePathError

    try:
        meta = json.loads((read_state(directory / META) or b"").decode("utf-8"))
        files = tuple(
            FileBackup(path=Path(f["path"]), existed=bool(f["existed"]), blob=f.get("blob"), sha256=f.get("sha256"),
                       written_sha256=f.get("written_sha256"), written_blob=f.get("written_blob"), link=f.get("link"),
                       target=f.get("target"))
            for f in meta["files"]
        )
        return Backup(
            id=meta["id"],
            tool=meta["tool"],
            created=meta["created"],
            operation=meta.get("operation", ""),
            mirror=meta.get("mirror", ""),
            kind=meta.get("kind", "use"),
            files=files,
            directory=directory,
            restored=meta.get("restored"),
        )
    except (OSError, ValueError, KeyError, TypeError, UnsafePathError):
        return None


def select_backups(root: Path, *, backup_id: str | None = None, tools: list[str] | None = None) -> list[Backup]:
    """Pick what ``mirror restore`` puts back.

    ``backup_id`` names one backup; else ``tools`` gives the newest unrestored
    backup of each; else all backups of the newest unrestored ``mirror use`` run.

    Raises:
        NoBackupError: nothing matches.
    """
    everything = list_backups(root)
    if backup_id:
        for backup in everything:
            if backup.id == backup_id:
                return [backup]
        known = ", ".join(b.id for b in everything[:5]) or "none"
        raise NoBackupError(
            f"no backup called {backup_id!r} in {root} (newest: {known}); `prefetch mirror restore --list` shows all"
        )
    candidates = [b for b in everything if b.kind == "use" and b.restored is None]
    if tools:
        chosen = []
        for tool in tools:
            match = next((b for b in candidates if b.tool == tool), None)
            if match is None:
                raise NoBackupError(
                    f"no backup left to restore for {tool} in {root}; `prefetch mirror use NAME --tool {tool}`"
                    " makes one, `prefetch mirror restore --list` shows all"
                )
            chosen.append(match)
        return chosen
    if not candidates:
        damaged = unreadable_backups(root)
        hint = (f"; {len(damaged)} backup(s) there cannot be read and were not used (meta.json missing, not JSON,"
                f" a link or another account's file): {', '.join(str(d) for d in damaged[:3])}" if damaged else "")
        raise NoBackupError(
            f"no backup left to restore in {root}; `prefetch mirror use` makes one before every write"
            f" (`prefetch mirror restore --list` shows restored ones, restorable by name){hint}"
        )
    operation = candidates[0].operation
    return [b for b in candidates if b.operation == operation]
