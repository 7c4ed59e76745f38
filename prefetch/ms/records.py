"""A ModelScope repo's completion record, and re-checking its files against it.

The record sits in prefetch's state dir (never in ModelScope's cache): written once every
selected file of a ``get ms://`` is in place, it lists each file's sha256 as the endpoint
listed it, so ``prefetch verify ms://...`` can re-hash the cached files offline.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Mapping

from prefetch.errors import UsageError
from prefetch.ms.names import MsRepo, snapshot_dir


def record_path(state: Path, root: Path, repo: MsRepo) -> Path:
    """``<state>/modelscope/<cache root digest>/<type>s--OWNER--NAME--REV.complete``."""
    import hashlib

    folder = f"{repo.segment}--{repo.repo_id.replace('/', '--')}--{repo.revision}"
    digest = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:12]  # one record per cache root
    return state / "modelscope" / digest / f"{folder}.complete"


def write_record(path: Path, *, label: str, snapshot: Path, endpoint: str, sha256: Mapping[str, str | None]) -> None:
    """Write the record atomically."""
    from prefetch.fs.files import replace_file

    record = {"name": label, "snapshot": str(snapshot), "endpoint": endpoint, "files": dict(sha256),
              "time": time.time()}
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, json.dumps(record, indent=1).encode())


def verify_repo(root: Path, state: Path, repo: MsRepo) -> list:
    """Re-hash every file the record of ``repo`` lists; files in the snapshot it does not list are ``unchecked``.

    Raises:
        UsageError: the repo (at that revision) is not in the cache, or was not placed by prefetch.
    """
    from prefetch.fs.hashing import hash_file
    from prefetch.model.plans import VerifyResult

    snap = snapshot_dir(root, repo)
    if not snap.is_dir():
        raise UsageError(f"{repo.label} is not in the ModelScope cache {root}; `prefetch get {repo.label}` fetches it")
    try:
        files = json.loads(record_path(state, root, repo).read_text(encoding="utf-8"))["files"]
        if not isinstance(files, dict):
            raise ValueError(files)
    except (OSError, ValueError, KeyError, TypeError):
        files = {}
    results = []
    for path, expected in sorted(files.items()):
        entry = snap.joinpath(*str(path).split("/"))
        if not entry.is_file() or entry.is_symlink():
            results.append(VerifyResult(str(entry), "missing", "sha256", expected, None))
            continue
        got = hash_file(entry, "sha256")
        state_ = "unchecked" if not expected else "ok" if got == expected else "mismatch"
        results.append(VerifyResult(str(entry), state_, "sha256", expected, got))
    listed = {snap.joinpath(*str(p).split("/")) for p in files}
    for entry in sorted(p for p in snap.rglob("*") if p.is_file() and not p.is_symlink()):
        if entry not in listed and not entry.name.endswith((".part", ".part.json")):
            results.append(VerifyResult(str(entry), "unchecked", "sha256", None, hash_file(entry, "sha256")))
    return results
