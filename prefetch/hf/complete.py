"""What prefetch knows of a repo it completed: a manifest under the state dir, written last.

``fetch_repo`` writes one per repo, revision and selection (``--include``/``--exclude``)
once every selected file is verified and linked: the commit and each file's path,
blob and size. It is what makes two things hold that the cache layout alone cannot:

* ``hf://ORG/NAME@COMMIT`` is done when its manifest exists (a snapshot folder can
  exist half-filled; the manifest is the repo's ``final`` path for ``wait``);
* when the Hub cannot be reached, a repo whose manifest still matches the cache
  (every pointer resolving to its blob, of its size) is ``cached`` rather than failed.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Sequence

from prefetch.fs.files import replace_file
from prefetch.hf import cache_layout
from prefetch.model.events import Event, EventKind, EventSink
from prefetch.model.plans import FileResult

_DIR = "hub-complete"


def manifest_path(state: Path, repo_dir: Path, revision: str, include: Sequence[str], exclude: Sequence[str]) -> Path:
    """Where the manifest of this repo, revision and selection lives."""
    key = json.dumps([str(repo_dir), revision, sorted(include), sorted(exclude)])
    return state / _DIR / (hashlib.sha1(key.encode("utf-8", "surrogateescape")).hexdigest() + ".json")


def record_complete(path: Path, *, commit: str, files: Sequence) -> None:
    """Write the manifest (``files``: ``api.HubFile``s with ``path``, ``etag``, ``size``) atomically."""
    data = {"commit": commit, "files": [{"path": f.path, "etag": f.etag, "size": f.size} for f in files]}
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, json.dumps(data, sort_keys=True).encode())


def complete_locally(path: Path, repo_dir: Path) -> tuple[str, list[dict]] | None:
    """(commit, files) when the manifest exists and every file is still in place, else None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        commit, files = str(data["commit"]), list(data["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for f in files:
        try:
            pointer = cache_layout.pointer_path(repo_dir, commit, str(f["path"]))
            blob = cache_layout.blob_path(repo_dir, str(f["etag"]))
            if not (pointer.is_symlink() and os.path.realpath(pointer) == os.path.realpath(blob)
                    and blob.is_file() and blob.stat().st_size == int(f["size"])):
                return None
        except (OSError, ValueError, KeyError, TypeError):
            return None
    return commit, files


def offline_results(plan, local: tuple[str, list[dict]], exc: Exception, on_event: EventSink,
                    started: float) -> list[FileResult]:
    """The Hub cannot be reached, but prefetch completed this selection and it is all still in place."""
    commit, files = local
    snapshot = cache_layout.snapshot_dir(plan.repo_dir, commit)
    size = sum(int(f["size"]) for f in files)
    on_event(Event(EventKind.NOTE, plan.label, message=f"the Hub could not be reached ({exc}); every file of the "
                   f"last complete get (commit {commit[:12]}) is in place: using it"))
    on_event(Event(EventKind.CACHED, plan.label, done=size, total=size, message=f"{len(files)} file(s) -> {snapshot}"))
    summary = FileResult(dataset=plan.label, name=plan.label, path=str(snapshot), paths=[str(snapshot)], size=size,
                         elapsed=time.monotonic() - started, algorithm="sha256/git-sha1", verified=True)
    summary.status = "cached"
    return [summary]
