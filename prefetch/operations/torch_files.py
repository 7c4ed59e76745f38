"""``rm`` and ``clean`` for ``torchvision:`` names and torch.hub checkpoints, and their plans.

Planned exactly as ``get`` plans them (the same tables, user registries, ``--root``,
``TORCH_HOME``), so the files looked at are the ones torchvision and torch.hub read.

* ``rm``: a ``--root`` is the user's own folder, and torch.hub's checkpoints dir is torch's:
  only what prefetch placed goes, each proven by prefetch's records (the completion record
  of that very file: path, inode, size, mtime; the extraction and decompression markers
  naming each entry). A file at the same name that prefetch did not place (torchvision's own
  download, the user's) is left alone and named; a link is never followed; another user's
  entry is never touched; a file being downloaded is skipped.
* ``clean``: the folders where a download can leave ``.part``/``.part.json`` and temp
  leftovers: only those the tables name under the root (``operations/housekeeping.py``
  removes them).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Mapping, Sequence

from prefetch.cache import placement
from prefetch.cache.layout import part_path, state_path
from prefetch.errors import LockTimeoutError, PrefetchError, UnsafePathError
from prefetch.flow.planning import plan_request
from prefetch.flow.request import GetRequest
from prefetch.fs import safefs
from prefetch.fs.beside_locks import beside_lock
from prefetch.fs.locks import hold_lock, lock_is_held
from prefetch.model.plans import FilePlan
from prefetch.operations.removal import RemoveResult, remove_paths

PREFIX = "torchvision:"


def is_torchvision_name(name: str) -> bool:
    return name[: len(PREFIX)].lower() == PREFIX


def torchvision_plans(names: Sequence[str], *, root: str | None, registries: Sequence[str],
                      env: Mapping[str, str] | None = None, torch_hub: bool = False,
                      hub_dir: str | None = None) -> list[FilePlan]:
    """The ``FilePlan`` s ``get`` makes for ``names`` (``torchvision:`` names, or URLs with ``torch_hub``;
    ``hub_dir``: torch.hub's dir as ``get --torch-hub -P DIR`` sets it, ``DIR/checkpoints``).

    Raises:
        UsageError (UnknownDatasetError): not a torchvision class or model prefetch knows.
    """
    request = GetRequest(names=list(names), root=root, registries=[str(r) for r in registries], torch_hub=torch_hub,
                         output_dir=hub_dir if torch_hub else None)
    plans, _ = plan_request(request, env=env)
    return [p for p in plans if isinstance(p, FilePlan)]


# ------------------------------------------------------------------------------------------- rm


def remove_torchvision(plans: list[FilePlan], result: RemoveResult, *, state: Path, dry_run: bool) -> None:
    """Add to ``result`` what removing ``plans`` removes: only what prefetch placed (see the module doc)."""
    locks = state / "locks"
    for plan in plans:
        if dry_run and lock_is_held(locks, plan.final):
            result.skipped.append(_busy(plan))
            continue
        try:
            if dry_run:
                _remove_placed(plan, result, state=state, dry_run=True)
                continue
            with hold_lock(locks, plan.final, timeout=0), \
                    beside_lock(plan.final, timeout=0, record=False, planted_ok=True):
                _remove_placed(plan, result, state=state, dry_run=False)
        except LockTimeoutError:
            result.skipped.append(_busy(plan))


def _busy(plan: FilePlan) -> str:
    return f"{plan.final}: being downloaded; left alone (`prefetch cancel` its job first)"


def _remove_placed(plan: FilePlan, result: RemoveResult, *, state: Path, dry_run: bool) -> None:
    records, markers = state / "placed", state / "extracted"
    try:
        safefs.check_dir_chain(plan.final.parent)  # a directory link another user planted: never entered
    except PrefetchError as exc:
        result.not_ours.append(f"{plan.final}: {exc}; left alone")
        return
    paths: list[tuple[Path, str]] = []
    record = placement.completion_path(records, plan.final)
    lst = safefs.lstat_or_none(plan.final)
    if lst is not None:
        if stat.S_ISREG(lst.st_mode) and placement.completion_matches(records, plan.final, lst):
            paths += [(plan.final, "file"), (record, "marker")]
        elif safefs.is_foreign(lst):
            result.not_ours.append(f"{plan.final}: belongs to another user (uid {lst.st_uid}); left alone")
        else:
            what = "a link" if stat.S_ISLNK(lst.st_mode) else "not placed by prefetch"
            result.not_placed.append(f"{plan.final}: {what}; left alone")
    elif os.path.lexists(record):
        paths.append((record, "marker"))
    for into in plan.extract_into:
        paths += _marked(placement.marker_path(markers, plan.final, into), into, result, kind="extracted",
                         markers=markers)
    for target in plan.decompress_to:
        paths += _marked(placement.marker_path(markers, plan.final, target), target.parent, result, kind="extracted")
    paths += [(p, k) for p, k in ((part_path(plan.final), "partial"), (state_path(plan.final), "state"))
              if os.path.lexists(p)]
    remove_paths(paths, result, dry_run=dry_run)


def _marked(marker: Path, into: Path, result: RemoveResult, *, kind: str,
            markers: Path | None = None) -> list[tuple[Path, str]]:
    """The entries a marker says prefetch's extraction created in ``into`` (each ours, not a link,
    and not merged into by another extraction), and the marker. An entry that was already there
    and merged into is not its own: left."""
    import json

    try:
        record = json.loads(safefs.read_bytes(marker) or b"")
        entries = [str(e) for e in record["entries"]]
        merged = {str(e) for e in record.get("merged", [])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UnsafePathError):
        return []
    others = _merged_by_others(markers, into, marker) if markers is not None else set()
    out: list[tuple[Path, str]] = []
    for entry in entries:
        if entry in ("", ".", "..") or "/" in entry or "\\" in entry:
            continue
        path = into / entry
        st = safefs.lstat_or_none(path)
        if st is None:
            continue
        if entry in merged:
            result.not_placed.append(f"{path}: was there before prefetch extracted into it; left alone")
        elif entry in others:
            result.not_placed.append(f"{path}: another extraction merged into it too; left alone")
        elif stat.S_ISLNK(st.st_mode):
            result.not_placed.append(f"{path}: a link where prefetch placed a file; left alone")
        elif safefs.is_foreign(st):
            result.not_ours.append(f"{path}: belongs to another user (uid {st.st_uid}); left alone")
        else:
            out.append((path, kind))
    return out + [(marker, "marker")]


def _merged_by_others(markers: Path, into: Path, mine: Path) -> set[str]:
    """Entries of ``into`` that another extraction's marker says it merged into."""
    import json

    found: set[str] = set()
    try:
        others = [p for p in markers.iterdir() if p.suffix == ".json" and p != mine]
    except OSError:
        return found
    for other in others:
        try:
            record = json.loads(safefs.read_bytes(other) or b"{}")
            if record.get("into") == str(into):
                found.update(str(e) for e in record.get("merged", []))
        except (OSError, ValueError, TypeError, AttributeError, UnsafePathError):
            continue
    return found


# ---------------------------------------------------------------------------------------- clean


def torchvision_dirs(root: Path, *, registries: Sequence[str] = (), env: Mapping[str, str] | None = None) -> list[Path]:
    """The folders under ``root`` where a torchvision: download can leave partials: the root and
    each class's ``dir`` and extraction folders (never the whole tree: a data root may be huge)."""
    from prefetch.cache.torchvision import load_tables
    from prefetch.fs.paths import config_dir

    tables = load_tables(extra_files=[Path(r) for r in registries], config_dir=config_dir(env))
    dirs = {root}
    for ds in tables.datasets.values():
        for f in ds.files:
            dirs.add(root / f.dir if f.dir else root)
            dirs.update(root / e if e else root for e in f.extract)
    return sorted(d for d in dirs if d.is_dir() and not d.is_symlink())
