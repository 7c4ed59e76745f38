"""Cache housekeeping: what the Keras cache holds on disk, ``rm`` of datasets, ``clean`` of leftovers.

Sizes are what the files take on disk (allocated blocks, as ``du`` counts), each inode
once: the cifar archive under its two names is counted once. Nothing here follows a
symbolic link: a link is removed as a link, and a directory is walked without entering
links. A download in progress holds its file's lock; ``remove_datasets`` and
``clean_cache`` check that lock and leave such files alone.
"""

from __future__ import annotations

import glob
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from prefetch.errors import LockTimeoutError, UsageError
from prefetch.model.plans import FilePlan
from prefetch.cache.plans import plan_files
from prefetch.cache.layout import datasets_dir, part_path, state_path
from prefetch.fs.beside_locks import beside_lock
from prefetch.fs.locks import hold_lock, lock_is_held
from prefetch.cache.registry import Registry
from prefetch.operations.removal import Removal, RemoveResult, disk_bytes, remove_paths

DEFAULT_OLDER_THAN = 7 * 86400.0
_TEMP = re.compile(r"^\.(?P<name>.+)\.(?P<kind>extract|old)-[0-9a-f]{8}$")
_TMP_FILE = re.compile(r"^\..+\.(?P<pid>\d+)(?:-[0-9a-f]+)?\.tmp$")  # fsutil.replace_file, aliases
_AGE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([smhdw]?)\s*$", re.I)
_AGE_UNITS = {"": 86400.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


@dataclass
class PartialFile:
    """An unfinished download (``.part`` and its state)."""

    path: str
    bytes: int  # on disk
    age: float  # seconds since it was last written
    active: bool  # a download holds its lock right now


@dataclass
class DatasetUsage:
    """What one dataset takes on disk."""

    name: str
    bytes: int  # files, their other names, extracted folders, partials (each inode once)
    paths: list[str] = field(default_factory=list)  # what exists of it
    partials: list[PartialFile] = field(default_factory=list)



def parse_age(text: str | float) -> float:
    """Seconds from ``7d``, ``12h``, ``30m``, ``45s``, ``2w`` (a bare number is days).

    Raises:
        UsageError: anything else.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if not 0 <= text < float("inf"):  # (NaN too: no file's age compares to it)
            raise UsageError(f"--older-than {text!r} is not an age; give seconds, 0 or more")
        return float(text)
    match = _AGE.match(str(text))
    if not match:
        raise UsageError(f"--older-than {text!r} is not an age; use e.g. 7d, 12h, 30m or 0")
    return float(match[1]) * _AGE_UNITS[match[2].lower()]



def dataset_paths(plan: FilePlan, *, markers_dir: Path, scan_archives: bool = True) -> list[tuple[Path, str]]:
    """Every path that belongs to ``plan`` (existing or not), with its kind.

    Extracted entries: a folder of its own (``cifar-10-batches-py-target``) belongs to
    the file whole; in a shared folder (``datasets/`` itself) only the top-level entries
    the extraction recorded, else those the archive lists.
    """
    from prefetch.cache.placement import completion_path as _completion_path
    from prefetch.cache.placement import marker_path as _marker_path

    base = datasets_dir_of(plan)
    out: list[tuple[Path, str]] = [(plan.final, "file")]
    # prefetch's record that it placed the file complete (state/placed), beside state/extracted
    out.append((_completion_path(markers_dir.parent / "placed", plan.final), "marker"))
    out += [(alias, "alias") for alias in plan.also]
    out += [(part_path(plan.final), "partial"), (state_path(plan.final), "state")]
    # A folder the files themselves live in (datasets/, or ~/.keras/datasets/ for tf-keras's
    # copies) is shared: only the entries this file's extraction made belong to it.
    shared = {os.path.abspath(p) for p in (base, plan.final.parent, *(a.parent for a in plan.also))}
    for into in plan.extract_into:
        marker = _marker_path(markers_dir, plan.final, into)
        if os.path.abspath(into) not in shared:
            out.append((into, "extracted"))
        else:
            out += [(into / entry, "extracted") for entry in _entries_of(marker, plan, scan=scan_archives)
                    if entry not in ("", ".", "..") and "/" not in entry and "\\" not in entry]
        out.append((marker, "marker"))
    return out


def datasets_dir_of(plan: FilePlan) -> Path:
    """The datasets dir a plan's relative names hang from."""
    target = Path(plan.spec.target)
    return plan.final.parents[len(target.parts) - 1] if not target.is_absolute() else plan.final.parent


def _entries_of(marker: Path, plan: FilePlan, *, scan: bool) -> list[str]:
    try:
        return [str(e) for e in json.loads(marker.read_text(encoding="utf-8"))["entries"]]
    except (OSError, ValueError, KeyError, TypeError):
        if not scan:
            return []
    for archive in plan.paths:  # no record: the archive's own top-level names, if it is here
        if archive.is_file() and not archive.is_symlink():
            return _archive_top_level(archive)
    return []


def _archive_top_level(archive: Path) -> list[str]:
    import tarfile
    import zipfile

    names: list[str] = []
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                names = zf.namelist()
        else:
            with tarfile.open(archive) as tar:
                names = tar.getnames()
    except (OSError, tarfile.TarError, zipfile.BadZipFile, EOFError):
        return []
    tops = {n.replace("\\", "/").lstrip("./").split("/")[0] for n in names}
    return sorted(t for t in tops if t and t not in (".", ".."))


def cache_usage(registry: Registry, *, root: Path, state: Path) -> list[DatasetUsage]:
    """Every known dataset with something on disk: its bytes, paths and partial downloads."""
    out = []
    locks, markers = state / "locks", state / "extracted"
    now = time.time()
    for name, spec in sorted(registry.datasets.items()):
        seen: set[tuple[int, int]] = set()
        usage = DatasetUsage(name=name, bytes=0)
        for plan in plan_files(spec, root=root):
            for path, kind in dataset_paths(plan, markers_dir=markers, scan_archives=False):
                if kind == "marker" or not os.path.lexists(path):
                    continue
                usage.bytes += disk_bytes(path, seen)
                usage.paths.append(str(path))
                if kind == "partial":
                    usage.partials.append(_partial(path, now=now, active=lock_is_held(locks, plan.final)))
        if usage.paths:
            out.append(usage)
    return out


def _partial(path: Path, *, now: float, active: bool) -> PartialFile:
    times = [os.lstat(p).st_mtime for p in (path, path.with_name(path.name + ".json")) if os.path.lexists(p)]
    return PartialFile(path=str(path), bytes=disk_bytes(path), age=max(0.0, now - max(times)), active=active)


def remove_datasets(names: list[str], registry: Registry, *, root: Path, state: Path,
                    dry_run: bool = False, hub_root: Path | None = None, env=None,
                    torchvision_root: str | None = None, registry_files: Sequence[str] = (),
                    torch_hub: bool = False, hub_dir: str | None = None, ms_root: Path | None = None) -> RemoveResult:
    """Remove datasets' files, other names, extracted folders, partials and markers.

    A file whose download is running (its lock is held) is left alone, with a line in
    ``skipped``. Links are removed as links, never followed.

    ``env``: with ``KERAS_HOME`` naming ``root``, the copies ``get`` added where tf-keras
    looks (``~/.keras``) go too.

    ``hf://`` names remove Hugging Face repos (or one ``@REVISION``) from ``hub_root``
    (default: the cache huggingface_hub uses); ``ms://`` names ModelScope repos from ``ms_root``
    (default: ``MODELSCOPE_CACHE``'s).

    ``torchvision:`` names (and URLs, with ``torch_hub``) remove only what prefetch placed
    for them under ``torchvision_root`` (default ./data) or in torch.hub's checkpoints
    (``hub_dir``/checkpoints with ``torch_hub``, as ``get --torch-hub -P DIR`` placed them)
    (``operations/torchvision.py``), planned with ``registry_files`` as ``get`` plans them.

    Raises:
        UnknownDatasetError: a name no registry knows (nothing is removed then).
    """
    from prefetch.hf.names import hub_cache_root, is_hub_name, parse_hub_name

    from prefetch.ms.names import is_ms_name, parse_ms_name

    repos = [parse_hub_name(n) for n in names if is_hub_name(n)]  # hf:// repos: prefetch/hf/housekeeping.py
    ms_repos = [(parse_ms_name(n), "@" in n) for n in names if is_ms_name(n)]  # operations/modelscope.py
    from prefetch.operations.torch_files import is_torchvision_name, remove_torchvision, torchvision_plans

    tv = [n for n in names if is_torchvision_name(n) or (torch_hub and "://" in n and not is_hub_name(n)
                                                         and not is_ms_name(n))]
    tv_plans = torchvision_plans(tv, root=torchvision_root, registries=registry_files, env=env,
                                 torch_hub=torch_hub, hub_dir=hub_dir) if tv else []  # all valid first
    specs = [registry.get(n) for n in names if not is_hub_name(n) and not is_ms_name(n) and n not in tv]
    result = RemoveResult(dry_run=dry_run)
    locks, markers = state / "locks", state / "extracted"
    from prefetch.flow.planners.datasets import tf_keras_plans

    for spec in specs:
        for plan in tf_keras_plans(plan_files(spec, root=root), env=env or {}, root=root):
            paths = dataset_paths(plan, markers_dir=markers)
            if dry_run:
                if lock_is_held(locks, plan.final):
                    result.skipped.append(_busy(plan, locks))
                    continue
                remove_paths(paths, result, dry_run=True)
                continue
            try:
                with hold_lock(locks, plan.final, timeout=0), \
                        beside_lock(plan.final, timeout=0, record=False, planted_ok=True):
                    remove_paths(paths, result, dry_run=False)
            except LockTimeoutError:
                result.skipped.append(_busy(plan, locks))
    if tv_plans:
        remove_torchvision(tv_plans, result, state=state, dry_run=dry_run)
    if repos:
        from prefetch.operations.hub import remove_repos

        remove_repos(repos, result, root=hub_root or hub_cache_root(), state=state, dry_run=dry_run)
    if ms_repos:
        from prefetch.ms.names import ms_cache_root
        from prefetch.operations.modelscope import remove_ms_repos

        remove_ms_repos(ms_repos, result, root=(ms_root or ms_cache_root(os.environ)).absolute(), state=state,
                        dry_run=dry_run)
    return result


def _busy(plan: FilePlan, locks: Path) -> str:
    from prefetch.fs.locks import lock_path, read_owner

    owner = read_owner(lock_path(locks, plan.final))
    who = owner.describe() if owner else "another process"
    return f"{plan.final}: being downloaded by {who}; left alone (`prefetch cancel` it first)"



def clean_cache(*, root: Path, state: Path, older_than: float = DEFAULT_OLDER_THAN, dry_run: bool = False,
                now: float | None = None, hub_root: Path | None = None, folders: Sequence[Path] = (),
                trees: Sequence[Path] = (), beside: Sequence[Path] = ()) -> RemoveResult:
    """Remove stale partial downloads and leftovers from the Keras cache, the Hugging Face cache,
    and ``folders`` (each alone: a torchvision root's folders, torch.hub's checkpoints dir),
    ``trees`` (walked: ModelScope's), and temp dirs staged beside the folders in ``beside``.

    * ``*.part`` (with its ``.part.json``) and ``.part.json`` without data, last written
      more than ``older_than`` seconds ago, whose download is not running;
    * temp dirs of killed extractions (``.NAME.extract-*``, ``.NAME.old-*``) and temp
      files of killed writes (``.NAME.PID.tmp``) whose extraction or download is not
      running, whatever their age (they are never resumed).
    """
    now = time.time() if now is None else now
    result = RemoveResult(dry_run=dry_run)
    locks = state / "locks"
    from prefetch.operations.hub import clean_partials
    from prefetch.hf.names import hub_cache_root

    clean_partials(result, root=hub_root or hub_cache_root(), state=state, older_than=older_than, now=now,
                   dry_run=dry_run)  # blobs/<etag>.part of hf:// repos
    for folder in folders:  # a torchvision root's folders, torch.hub's checkpoints: not walked below
        _clean_tree(folder, locks, result, older_than=older_than, now=now, dry_run=dry_run, deep=False)
    for tree in trees:  # ModelScope's models/ and datasets/
        _clean_tree(tree, locks, result, older_than=older_than, now=now, dry_run=dry_run)
    base = datasets_dir(root)
    if base.is_dir():
        _clean_tree(base, locks, result, older_than=older_than, now=now, dry_run=dry_run)
    for top in (base, *beside):  # extraction into a folder itself stages beside it
        for entry in glob.glob(os.path.join(glob.escape(str(top.parent)), f".{glob.escape(top.name)}.*-*")):
            if _TEMP.match(os.path.basename(entry)):
                _clean_temp(Path(entry), locks, result, dry_run=dry_run)
    return result


def _clean_tree(base: Path, locks: Path, result: RemoveResult, *, older_than: float, now: float, dry_run: bool,
                deep: bool = True) -> None:
    """Stale partials and temp leftovers in ``base`` (and below it unless not ``deep``); links never entered."""
    if not base.is_dir() or base.is_symlink():
        return
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        for name in list(dirnames):
            if _TEMP.match(name):
                dirnames.remove(name)  # do not descend into what may go
                _clean_temp(here / name, locks, result, dry_run=dry_run)
            elif os.path.islink(here / name):
                dirnames.remove(name)
        if not deep:
            dirnames.clear()
        for name in filenames:
            path = here / name
            if _TEMP.match(name) or _TMP_FILE.match(name):
                _clean_temp(path, locks, result, dry_run=dry_run)
            elif name.endswith(".part") or (name.endswith(".part.json") and not os.path.lexists(path.with_suffix(""))):
                _clean_partial(path, locks, result, older_than=older_than, now=now, dry_run=dry_run)
            elif name.endswith(".part.lock") and not os.path.lexists(path.with_suffix("")):
                _clean_lock(here / name[:-len(".part.lock")], locks, result, dry_run=dry_run)


def _clean_partial(path: Path, locks: Path, result: RemoveResult, *, older_than: float, now: float,
                   dry_run: bool) -> None:
    final = path.with_name(path.name[: -len(".part")] if path.name.endswith(".part") else path.name[: -len(".part.json")])
    group = [p for p in (part_path(final), state_path(final)) if os.path.lexists(p)]
    if not group or any(r.path == str(group[0]) for r in result.removed):
        return  # already handled with its .part
    newest = max(os.lstat(p).st_mtime for p in group)
    if now - newest < older_than:
        return
    if lock_is_held(locks, final):
        result.skipped.append(f"{path}: its download is running; left alone")
        return
    if dry_run:
        remove_paths([(p, "partial") for p in group], result, dry_run=True)
        return
    try:
        with hold_lock(locks, final, timeout=0), beside_lock(final, timeout=0, record=False, planted_ok=True):
            remove_paths([(p, "partial") for p in group], result, dry_run=False)
    except LockTimeoutError:
        result.skipped.append(f"{path}: its download started; left alone")


def _clean_lock(final: Path, locks: Path, result: RemoveResult, *, dry_run: bool) -> None:
    """The lock file beside ``final`` that a killed run left without a ``.part`` (``kill -9``
    before the ``.part`` was made): taken and let go, which removes it when it is ours (another
    user's, a file of the user's of that name, a link: left as they are); one a run holds stays."""
    from prefetch.fs.locks import beside_is_held, beside_lock_path

    lock = beside_lock_path(final)
    if lock_is_held(locks, final) or beside_is_held(final):
        return  # (its run goes on, and the lock goes with it)
    if dry_run:
        return  # (whether it would go is known only by taking it)
    try:
        with hold_lock(locks, final, timeout=0), beside_lock(final, timeout=0, record=False, planted_ok=True):
            pass
    except LockTimeoutError:
        return
    if not os.path.lexists(lock):
        result.removed.append(Removal(path=lock, bytes=0, reason="temp"))


def _clean_temp(path: Path, locks: Path, result: RemoveResult, *, dry_run: bool) -> None:
    """A temp dir/file of a killed extraction or write; skipped while its owner runs."""
    match = _TEMP.match(path.name)
    if match:  # guarded by the extraction lock of the dir it was extracting into
        key = path.parent / f".{match['name']}.extracting"
    else:  # .NAME.PID[-HEX].tmp: a write by process PID
        pid = _TMP_FILE.match(path.name)["pid"]
        from prefetch.fs.processes import is_process_alive

        if is_process_alive(int(pid)):
            result.skipped.append(f"{path}: process {pid} is writing it; left alone")
            return
        key = None
    if key is not None and lock_is_held(locks, key):
        result.skipped.append(f"{path}: an extraction is running; left alone")
        return
    remove_paths([(path, "temp")], result, dry_run=dry_run)


def torch_ms_places(torchvision_root: str | None = None, *, env=None, ms_root: Path | None = None) -> dict:
    """``clean_cache``'s ``folders``/``trees``/``beside`` for torchvision, torch.hub and ModelScope:
    the folders of a torchvision root (``torchvision_root``, else ./data when it exists),
    torch.hub's checkpoints dir, and ModelScope's ``models/`` and ``datasets/`` (under ``ms_root``,
    else ``MODELSCOPE_CACHE``'s)."""
    from prefetch.cache.torchvision import torch_hub_dir
    from prefetch.fs.paths import expand_path
    from prefetch.ms.names import ms_cache_root
    from prefetch.operations.torch_files import torchvision_dirs

    env = os.environ if env is None else env
    root = expand_path(torchvision_root or "data", "--root").absolute()
    tv = torchvision_dirs(root, env=env) if root.is_dir() else []
    ms = (ms_root or ms_cache_root(env)).absolute()
    return {"folders": [*tv, torch_hub_dir(env)], "trees": [ms / "models", ms / "datasets"], "beside": tv}

