"""``prefetch rm hf://...`` and ``clean`` for the Hugging Face cache.

``rm hf://ORG/NAME`` removes the repo's whole folder (blobs, snapshots, refs, partials)
and huggingface_hub's lock folder for it. ``rm hf://ORG/NAME@REV`` removes one
revision as huggingface_hub's ``delete_revisions`` does: its snapshot, the refs that
point at it, and the blobs no other snapshot links to. A repo that prefetch is
downloading right now (its repo lock is held) is left alone. Links are removed as
links, never followed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from prefetch.hf import cache_layout
from prefetch.hf.names import HubRepo
from prefetch.fs.locks import lock_is_held
from prefetch.operations.removal import remove_paths, remove_unless_busy


def remove_repos(repos: list[HubRepo], result, *, root: Path, state: Path, dry_run: bool) -> None:
    """Add to ``result`` (a ``removal.RemoveResult``) what removing ``repos`` removes."""
    locks = state / "locks"
    for repo in repos:
        folder = root / repo.folder
        if not os.path.lexists(folder):
            continue
        explicit = "@" in repo.label
        paths = _revision_paths(folder, repo) if explicit else [(folder, "repo"), (root / ".locks" / repo.folder, "lock")]
        remove_unless_busy(paths, folder, result, locks=locks, dry_run=dry_run)


def _revision_paths(folder: Path, repo: HubRepo) -> list[tuple[Path, str]]:
    """One revision: its snapshot, the refs naming its commit, its listing (``trees/``), and blobs only it links to."""
    commit = repo.revision if repo.is_commit else cache_layout.read_ref(folder, repo.revision)
    if not commit:
        return [(cache_layout.ref_path(folder, repo.revision), "ref")]
    snapshots = folder / "snapshots"
    mine, others = _linked_blobs(snapshots / commit), set()
    for snap in snapshots.iterdir() if snapshots.is_dir() else []:
        if snap.name != commit and snap.is_dir() and not snap.is_symlink():
            others |= _linked_blobs(snap)
    refs = folder / "refs"
    out: list[tuple[Path, str]] = [(snapshots / commit, "snapshot"), (cache_layout.tree_path(folder, commit), "listing")]
    for ref in sorted(refs.rglob("*")) if refs.is_dir() else []:
        if ref.is_file() and not ref.is_symlink() and cache_layout.read_ref(folder, str(ref.relative_to(refs))) == commit:
            out.append((ref, "ref"))
    out += [(folder / "blobs" / name, "blob") for name in sorted(mine - others)]
    return out


def _linked_blobs(snapshot: Path) -> set[str]:
    """Names of the blobs a snapshot's links point to (inside its repo's ``blobs/``)."""
    names = set()
    for dirpath, dirnames, filenames in os.walk(snapshot):  # os.walk does not enter linked folders
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                target = os.readlink(path)
                parts = target.replace("\\", "/").split("/")
                if len(parts) >= 2 and parts[-2] == "blobs" and parts[-1] not in ("", ".", ".."):
                    names.add(parts[-1])
    return names


def clean_partials(result, *, root: Path, state: Path, older_than: float, now: float | None = None,
                   dry_run: bool) -> None:
    """Stale ``blobs/<etag>.part`` (+ ``.part.json``) in every repo, unless its download runs."""
    now = time.time() if now is None else now
    locks = state / "locks"
    try:
        folders = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink() and "--" in p.name]
    except OSError:
        return
    for folder in folders:
        blobs = folder / "blobs"
        for part in sorted(blobs.glob("*.part")) if blobs.is_dir() and not blobs.is_symlink() else []:
            group = [p for p in (part, part.with_name(part.name + ".json")) if os.path.lexists(p)]
            if now - max(os.lstat(p).st_mtime for p in group) < older_than:
                continue
            blob = part.with_name(part.name[: -len(".part")])
            if lock_is_held(locks, folder) or lock_is_held(locks, blob):
                result.skipped.append(f"{part}: its download is running; left alone")
                continue
            remove_paths([(p, "partial") for p in group], result, dry_run=dry_run)
