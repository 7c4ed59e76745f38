"""What is in the local Keras cache: per-dataset state, and re-verification."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from prefetch.errors import UsageError
from prefetch.cache.plans import plan_files
from prefetch.cache.registry import Registry
from prefetch.fs.hashing import first_mismatch, hash_file
from prefetch.cache import placement
from prefetch.cache.layout import part_path, state_path
from prefetch.model.plans import FilePlan, VerifyResult


@dataclass
class FileState:
    """One file of a dataset on disk."""

    name: str
    path: str
    state: str  # complete | partial | missing
    bytes: int
    total: int | None


@dataclass
class DatasetState:
    """A dataset's local state: complete only when every file is."""

    name: str
    description: str
    state: str  # complete | partial | missing
    percent: float | None
    files: list[FileState] = field(default_factory=list)
    bytes: int = 0  # on disk: files, other names, extracted folders, partials (each inode once)
    partials: list = field(default_factory=list)  # housekeeping.PartialFile: path, bytes, age, active


def list_datasets(registry: Registry, *, root: Path, state: Path | None = None) -> list[DatasetState]:
    """Every known dataset and what of it is on disk (no hashing: fast).

    With prefetch's ``state`` dir, each dataset's size on disk and its partial
    downloads (with their age, and whether a download is running) are filled in.
    """
    usage = {}
    if state is not None:
        from prefetch.operations.housekeeping import cache_usage

        usage = {u.name: u for u in cache_usage(registry, root=root, state=state)}
    out = []
    for name, spec in sorted(registry.datasets.items()):
        files = []
        for plan in plan_files(spec, root=root):
            state, done, total = local_state(plan)
            files.append(FileState(plan.label, str(plan.final), state, done, total))
        states = {f.state for f in files}
        if states == {"complete"}:
            overall = "complete"
        elif states == {"missing"}:
            overall = "missing"
        else:
            overall = "partial"
        known = [f for f in files if f.total]
        percent = None
        if overall == "partial" and known and len(known) == len(files):
            percent = 100.0 * sum(f.bytes for f in files) / sum(f.total for f in files)
        row = DatasetState(name, spec.description, overall, percent, files)
        if name in usage:
            row.bytes, row.partials = usage[name].bytes, usage[name].partials
        out.append(row)
    return out



def verify_cached(target: str, registry: Registry, *, root: Path) -> list[VerifyResult]:
    """Re-hash a cached dataset (by name) or a file (by path).

    A plain path is hashed with sha256 and reported ``unchecked`` unless it is a
    known dataset file, whose registry hash is then used.

    Raises:
        UsageError: neither a dataset nor an existing file.
    """
    path = Path(os.path.expanduser(target))
    if os.path.lexists(path) and not path.is_dir():  # a FIFO or device too: refused, never opened blocking
        for spec in registry.datasets.values():
            for plan in plan_files(spec, root=root):
                if path.absolute() in [p.absolute() for p in plan.paths]:
                    return [_verify_one(path, plan.spec.expected, plan.spec.more_hashes)]
        return [_verify_one(path, _torch_hub_expected(path))]
    if "/" in target or path.suffix:
        if not path.exists():
            raise UsageError(f"{target}: no such file")
    spec = registry.get(target)
    results = []
    for plan in plan_files(spec, root=root):
        for p in plan.paths:
            results.append(_verify_one(p, plan.spec.expected, plan.spec.more_hashes))
    return results


def _verify_one(path: Path, expected, more_hashes=()) -> VerifyResult:
    """``path`` re-hashed against ``expected`` and every one of ``more_hashes`` (an md5 beside the
    sha256): ``ok`` names them all (``sha256+md5``), a ``mismatch`` the first the file does not match."""
    if not path.exists():
        return VerifyResult(str(path), "missing", expected.algorithm if expected else None,
                            expected.hexdigest if expected else None, None)
    if expected is None:
        return VerifyResult(str(path), "unchecked", "sha256", None, hash_file(path, "sha256"))
    got = hash_file(path, expected.algorithm)
    wrong = (expected, got) if not expected.matches(got) else first_mismatch(path, more_hashes)
    if wrong is not None:
        return VerifyResult(str(path), "mismatch", wrong[0].algorithm, wrong[0].hexdigest, wrong[1])
    algorithms = "+".join(h.algorithm for h in (expected, *more_hashes))
    return VerifyResult(str(path), "ok", algorithms, expected.hexdigest, got)


def local_state(plan: FilePlan) -> tuple[str, int, int | None]:
    """("complete" | "partial" | "missing", bytes on disk, size) without hashing or opening.

    Raises:
        UnsafePathError: a FIFO, device or directory sits at a final path.
    """
    from prefetch.engine.resume_state import read_progress

    finals = [placement.regular_or_none(p) for p in plan.paths]
    if all(st is not None for st in finals):
        size = finals[0].st_size
        return "complete", size, size
    progress = read_progress(part_path(plan.final), state_path(plan.final))
    if progress is not None:
        return "partial", progress[0], progress[1]
    if finals[0] is not None:
        size = finals[0].st_size
        return "complete", size, size
    return "missing", 0, None


def _torch_hub_expected(path: Path):
    """A file in torch.hub's checkpoints dir: the full sha256 known for its name, else its
    name's sha256 prefix, as torch.hub checks it (None elsewhere, or without one)."""
    from prefetch.cache.torchvision import load_tables, torch_hub_dir
    from prefetch.errors import PrefetchError

    try:
        if path.absolute().parent != torch_hub_dir().absolute():
            return None
        return load_tables().hub_expected(path.name)
    except PrefetchError:
        return None

