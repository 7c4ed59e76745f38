"""``prefetch rm ms://...`` for ModelScope's cache.

``rm ms://ORG/NAME`` removes the repo's folder (every revision) and prefetch's completion
records for it; ``rm ms://ORG/NAME@REV`` removes that revision's snapshot folder and its
record. A repo prefetch is downloading right now (its repo lock is held) is left alone.
Links are removed as links, never followed.
"""

from __future__ import annotations

import os
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
