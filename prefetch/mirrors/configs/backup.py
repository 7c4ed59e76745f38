"""Timestamped backups of tool config files, atomic writes, and byte-exact restore.

A backup is a directory ``<state dir>/backups/<tool>-<UTC stamp>/`` holding
``meta.json`` (which files, whether each existed, which mirror, which operation)
and one blob per file that existed. ``restore`` writes the blobs back byte for
byte and deletes files that did not exist before. Backups made by one
``mirror use`` run share an operation id, so a bare ``mirror restore`` undoes that
whole run; each restore marks its backups restored, so repeating ``restore`` walks
back through earlier runs.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, replace
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


@dataclass(frozen=True)
class RestoredFile:
    """What a restore did to one file."""

    path: Path
    action: str  # "restored" or "removed" or "absent"


@dataclass(frozen=True)
class RestoreResult:
    """One backup put back, and the safety backup made of what it replaced."""

    backup: Backup
    files: tuple[RestoredFile, ...]
    safety_backup: Backup


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


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step (temp file beside it + ``os.replace``).

    A symlinked config (dotfile managers) is followed, so the link stays a link.
    The file keeps its permission bits.

    Raises:
        LocalFileError: the directory or file cannot be written.
    """
    from prefetch.fs.files import replace_file

    target = Path(os.path.realpath(path))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = target.stat().st_mode & 0o7777 if target.exists() else None
        replace_file(target, data, durable=True, mode=mode)
    except OSError as exc:
        raise LocalFileError(
            f"cannot write {path}: {exc.strerror or exc}; check permissions (or use --scope user)"
        ) from None


def create_backup(
    paths: list[Path], *, tool: str, root: Path, mirror: str, operation: str, kind: str = "use"
) -> Backup:
    """Save the current bytes of ``paths`` (or that they do not exist) under ``root``.

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
    files = []
    try:
        directory.mkdir(parents=True)
        for index, path in enumerate(paths):
            path = Path(path)
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                files.append(FileBackup(path=path, existed=False, blob=None))
                continue
            blob = f"{index}-{path.name}"
            (directory / blob).write_bytes(data)
            files.append(FileBackup(path=path, existed=True, blob=blob))
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
    _write_meta(backup)
    return backup


def _write_meta(backup: Backup) -> None:
    meta = {
        "id": backup.id,
        "tool": backup.tool,
        "created": backup.created,
        "operation": backup.operation,
        "mirror": backup.mirror,
        "kind": backup.kind,
        "restored": backup.restored,
        "files": [{"path": str(f.path), "existed": f.existed, "blob": f.blob} for f in backup.files],
    }
    write_atomic(backup.directory / META, (json.dumps(meta, indent=2) + "\n").encode())


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
    try:
        meta = json.loads((directory / META).read_text(encoding="utf-8"))
        files = tuple(
            FileBackup(path=Path(f["path"]), existed=bool(f["existed"]), blob=f.get("blob"))
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
    except (OSError, ValueError, KeyError, TypeError):
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
        raise NoBackupError(
            f"no backup left to restore in {root}; `prefetch mirror use` makes one before every write"
            " (`prefetch mirror restore --list` shows restored ones, restorable by name)"
        )
    operation = candidates[0].operation
    return [b for b in candidates if b.operation == operation]


def restore_backup(backup: Backup, *, root: Path, operation: str) -> RestoreResult:
    """Put ``backup``'s files back byte for byte; remove files that did not exist.

    The current files are saved first (kind ``pre-restore``), so a restore can be undone
    by restoring that backup by name.

    Raises:
        LocalFileError: a file cannot be written or removed, or a blob is missing.
    """
    paths = [f.path for f in backup.files]
    safety = create_backup(
        paths, tool=backup.tool, root=root, mirror=backup.mirror, operation=operation, kind="pre-restore"
    )
    results = []
    for item in backup.files:
        if item.existed:
            try:
                data = (backup.directory / str(item.blob)).read_bytes()
            except OSError as exc:
                raise LocalFileError(
                    f"backup {backup.id} is missing its copy of {item.path}: {exc.strerror or exc}"
                ) from None
            write_atomic(item.path, data)
            results.append(RestoredFile(path=item.path, action="restored"))
        else:
            try:
                Path(item.path).unlink()
                results.append(RestoredFile(path=item.path, action="removed"))
            except FileNotFoundError:
                results.append(RestoredFile(path=item.path, action="absent"))
            except OSError as exc:
                raise LocalFileError(f"cannot remove {item.path}: {exc.strerror or exc}") from None
    done = replace(backup, restored=datetime.now(timezone.utc).isoformat())
    _write_meta(done)
    return RestoreResult(backup=done, files=tuple(results), safety_backup=safety)
