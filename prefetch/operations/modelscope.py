"""``prefetch rm ms://...`` and ``list`` for ModelScope's cache (``verify``: ``ms/records.py``).

``rm ms://ORG/NAME`` removes the repo's folder (every revision) and prefetch's completion
records for it; ``rm ms://ORG/NAME@REV`` removes that revision's snapshot folder and its
record. A repo prefetch is downloading right now (its repo lock is held) is left alone.
Links are removed as links, never followed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from prefetch.ms.names import MsRepo, repo_dir, snapshot_dir
from prefetch.ms.records import record_path
from prefetch.operations.removal import remove_unless_busy


def remove_ms_repos(repos: list[tuple[MsRepo, bool]], result, *, root: Path, state: Path, dry_run: bool) -> None:
    """Add to ``result`` what removing ``repos`` removes; each with whether a revision was named."""
    locks = state / "locks"
    for repo, one_revision in repos:
        folder = repo_dir(root, repo)
        if not os.path.lexists(folder):
            continue
        if one_revision:
            paths = [(snapshot_dir(root, repo), "snapshot"), (record_path(state, root, repo), "record")]
        else:
            records = record_path(state, root, repo).parent
            prefix = f"{repo.segment}--{repo.repo_id.replace('/', '--')}--"
            mine = sorted(records.glob(prefix + "*.complete")) if records.is_dir() else []
            paths = [(folder, "repo"), *((p, "record") for p in mine)]
        paths = [(p, what) for p, what in paths if os.path.lexists(p)]
        remove_unless_busy(paths, folder, result, locks=locks, dry_run=dry_run)


@dataclass
class MsRepoState:
    """One revision of a ModelScope repo in the cache, for ``prefetch list``."""

    name: str  # ms://ORG/NAME@REV or ms://datasets/ORG/NAME@REV
    path: str  # its snapshot folder
    state: str  # complete (prefetch's record, nothing in flight) | partial | unverified (no record of prefetch's)
    files: int = 0
    bytes: int = 0  # on disk, partials included, each inode once
    partial: int = 0  # bytes of .part files


def list_ms_repos(root: Path, state: Path) -> list[MsRepoState]:
    """Every revision under ``<root>/{models,datasets}/<owner>--<name>/snapshots/`` (the current layout).

    No hashing: ``verify`` re-hashes. Links are not followed.
    """
    from prefetch.ms.names import MsRepo
    from prefetch.operations.removal import disk_bytes

    out = []
    for segment in ("models", "datasets"):
        try:
            folders = sorted(p for p in (root / segment).iterdir() if p.is_dir() and not p.is_symlink() and "--" in p.name)
        except OSError:
            continue
        for folder in folders:
            owner, _, name = folder.name.partition("--")
            snapshots = folder / "snapshots"
            try:
                revisions = sorted(p for p in snapshots.iterdir() if p.is_dir() and not p.is_symlink())
            except OSError:
                continue
            for snap in revisions:
                repo = MsRepo(repo_type=segment[:-1], repo_id=f"{owner}/{name}", revision=snap.name)
                row = MsRepoState(name=repo.label, path=str(snap), state="unverified")
                seen: set[tuple[int, int]] = set()
                for dirpath, _dirs, files in os.walk(snap):
                    for file in files:
                        path = Path(dirpath) / file
                        size = disk_bytes(path, seen)
                        row.bytes += size
                        if file.endswith(".part"):
                            row.partial += size
                        elif not file.endswith(".part.json"):
                            row.files += 1
                if row.partial:
                    row.state = "partial"
                elif os.path.lexists(record_path(state, root, repo)):
                    row.state = "complete"
                out.append(row)
    return out
