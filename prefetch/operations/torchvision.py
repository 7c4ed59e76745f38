"""``list`` and ``verify`` for ``torchvision:`` names and torch.hub checkpoints.

Planned exactly as ``get`` plans them (``operations/torch_files.py``), so the files
looked at are the ones torchvision and torch.hub read. ``verify`` re-hashes each file (md5
for datasets, sha256 for weights: full, or the name's prefix as torch.hub checks it); a
decompressed MNIST file has no published hash: it is ``missing`` when absent, else
``unchecked``. ``list`` hashes nothing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from prefetch.cache.layout import part_path, state_path
from prefetch.errors import UnsafePathError
from prefetch.fs.locks import lock_is_held
from prefetch.model.plans import FilePlan, VerifyResult
from prefetch.operations.listing import _verify_one
from prefetch.operations.removal import disk_bytes
from prefetch.operations.torch_files import PREFIX, is_torchvision_name, torchvision_plans  # noqa: F401


def verify_torchvision(name: str, *, root: str | None, registries: list[str],
                       env: Mapping[str, str] | None = None, torch_hub: bool = False,
                       hub_dir: str | None = None) -> list[VerifyResult]:
    """One ``VerifyResult`` per file of ``name`` (and per decompressed file beside it)."""
    results = []
    for plan in torchvision_plans([name], root=root, registries=registries, env=env, torch_hub=torch_hub,
                                  hub_dir=hub_dir):
        results.append(_verify_one(plan.final, plan.spec.expected, plan.spec.more_hashes))
        for target in plan.decompress_to:
            results.append(_verify_one(target, None))
    return results


# ----------------------------------------------------------------------------------------- list


@dataclass
class TorchEntry:
    """A torchvision dataset or checkpoint on disk, for ``prefetch list``."""

    name: str  # torchvision:CIFAR10, torchvision:resnet50.IMAGENET1K_V2, or a checkpoint's file name
    kind: str  # dataset | weights | checkpoint
    state: str  # complete | partial | missing
    bytes: int = 0  # on disk, each inode once
    paths: list[str] = field(default_factory=list)
    partial_age: float | None = None  # seconds since the newest partial was written
    active: bool = False  # a download holds its lock


def list_torchvision(names: Sequence[str] = (), *, root: str | None, registries: Sequence[str], state: Path,
                     env: Mapping[str, str] | None = None) -> list[TorchEntry]:
    """``names`` as they are on disk; without names every dataset class with something under
    ``root`` (default ./data) and every checkpoint in torch.hub's checkpoints dir. No hashing."""
    from prefetch.cache.torchvision import load_tables, torch_hub_dir
    from prefetch.fs.paths import config_dir

    env = os.environ if env is None else env
    if names:
        plans = torchvision_plans(names, root=root, registries=registries, env=env)
        return _rows(_grouped(plans), state)
    tables = load_tables(extra_files=[Path(r) for r in registries], config_dir=config_dir(env))
    classes = [PREFIX + c for c in sorted(tables.datasets)]
    plans = torchvision_plans(classes, root=root, registries=registries, env=env) if classes else []
    rows = [r for r in _rows(_grouped(plans), state) if r.state != "missing"]
    hub = torch_hub_dir(env)
    by_file = {w.file_name: f"{PREFIX}{w.model}.{w.entry}" for ws in tables.weights.values() for w in ws.values()}
    names_in_hub = sorted({n[: -len(".part")] if n.endswith(".part") else n for n in _listdir(hub)
                           if not n.startswith(".") and not n.endswith((".json", ".tmp"))})
    for name in names_in_hub:
        plan = FilePlan(dataset=by_file.get(name, name), spec=_spec(name, hub), final=hub / name, also=(),
                        extract_into=())
        rows += _rows({plan.dataset: [plan]}, state, kind="weights" if name in by_file else "checkpoint")
    return rows


def _spec(name: str, hub: Path):
    from prefetch.model.specs import FileSpec

    return FileSpec(name=name, url="file:///" + name, target=str(hub / name))


def _listdir(path: Path) -> list[str]:
    try:
        return [e.name for e in os.scandir(path) if e.is_file(follow_symlinks=False)]
    except OSError:
        return []


def _grouped(plans: list[FilePlan]) -> dict[str, list[FilePlan]]:
    groups: dict[str, list[FilePlan]] = {}
    for plan in plans:
        groups.setdefault(plan.dataset, []).append(plan)
    return groups


def _rows(groups: dict[str, list[FilePlan]], state: Path, *, kind: str | None = None) -> list[TorchEntry]:
    from prefetch.operations.listing import local_state

    locks, now, out = state / "locks", time.time(), []
    for name, plans in groups.items():
        seen: set[tuple[int, int]] = set()
        in_hub = plans[0].final.parent.name == "checkpoints" and plans[0].final.parent.parent.name == "hub"
        row = TorchEntry(name=name, kind=kind or ("weights" if in_hub else "dataset"), state="missing")
        states = []
        for plan in plans:
            try:
                st, _done, _total = local_state(plan)
            except UnsafePathError:
                st = "partial"
            if st == "complete" and not all(os.path.lexists(t) for t in plan.decompress_to):
                st = "partial"
            elif st == "missing" and any(os.path.lexists(p) for p in (part_path(plan.final), *plan.decompress_to)):
                st = "partial"  # a partial whose state is unreadable, or decompressed files without their .gz
            states.append(st)
            for path in (plan.final, *plan.decompress_to, part_path(plan.final), state_path(plan.final)):
                if os.path.lexists(path):
                    row.bytes += disk_bytes(path, seen)
                    row.paths.append(str(path))
            for path in (part_path(plan.final), state_path(plan.final)):
                if os.path.lexists(path):
                    age = now - os.lstat(path).st_mtime
                    row.partial_age = age if row.partial_age is None else min(row.partial_age, age)
                    row.active = row.active or lock_is_held(locks, plan.final)
        row.state = ("complete" if set(states) == {"complete"} else "missing" if set(states) == {"missing"}
                     else "partial")
        out.append(row)
    return out
