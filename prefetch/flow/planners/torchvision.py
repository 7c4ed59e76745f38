"""``torchvision:`` names: datasets under the user's ``--root``, weights into torch.hub's checkpoints.

``torchvision:CIFAR10`` is a dataset class: its files go under ``--root`` (default
``./data``) exactly where the class's ``_check_exists``/``_check_integrity`` look,
verified by torchvision's md5s, extracted or decompressed as ``download=True`` would.
``torchvision:resnet50`` is a model's default weights, ``torchvision:resnet50.IMAGENET1K_V1``
one entry: the file goes to ``<TORCH_HOME>/hub/checkpoints/<name>``, checked by a full
sha256 where one is known, else by the sha256 prefix in its name as torch.hub checks it.
``prefetch get URL --torch-hub`` does the same for any checkpoint URL (``plan_hub_urls``).

Neither torch nor torchvision is imported: the tables are data (``cache/torchvision.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from prefetch.cache.plans import plan_files
from prefetch.errors import UnknownDatasetError, UsageError
from prefetch.flow.planners.base import PlanContext, Planner
from prefetch.flow.request import GetRequest, shown_url
from prefetch.fs.paths import expand_path
from prefetch.model.plans import FilePlan
from prefetch.model.specs import ExpectedHash, FileSpec
from prefetch.net.urls import check_url, redact_url

if TYPE_CHECKING:
    from prefetch.cache.torchvision import TorchvisionTables, TvDataset

# The tables (cache/torchvision.py, cache/registry.py) are imported where a torchvision: name is
# planned: a command without one (a plain URL) does not pay for them at start-up.

PREFIX = "torchvision:"
DEFAULT_ROOT = "data"  # torchvision's examples: datasets.CIFAR10(root="data", download=True)


def dataset_root(request: GetRequest) -> Path:
    """``--root`` (default ``./data``), absolute."""
    return expand_path(request.root or DEFAULT_ROOT, "--root").absolute()


def plan_dataset(ds: TvDataset, *, root: Path, keras_root: Path, keras_registry,
                 split: str | None = None) -> list[FilePlan]:
    """Where each file of ``ds`` goes under ``root``, as the class checks it.

    A file Keras also downloads (``keras = "cifar10"``) gets that entry's byte-identical
    copies as more sources, and Keras's cached copy, when verified, is hard-linked
    instead of downloaded (``FilePlan.copies``).
    """
    files = _files_of(ds, split)
    plans = []
    for f in files:
        folder = root / f.dir if f.dir else root
        final = folder / f.local_name
        urls, copies = list(f.urls), []
        if f.keras:
            for kplan in plan_files(keras_registry.get(f.keras), root=keras_root):
                if kplan.spec.name == f.name:
                    urls += [u for u in kplan.spec.urls if u not in urls]
                    copies += kplan.paths
        spec = FileSpec(name=f.name, url=urls[0], target=str(final), expected=f.expected,
                        alternates=tuple(urls[1:]), size=f.size)
        plans.append(FilePlan(
            dataset=f"torchvision:{ds.name}", spec=spec, final=final, also=(),
            extract_into=tuple(root / e if e else root for e in f.extract),
            decompress_to=(final.with_name(f.decompressed),) if f.decompress else (),
            copies=tuple(copies), shares=f"{f.keras}/{f.name}" if f.keras else None,
            # torchvision extracts with tarfile/zipfile: into the directories already there
            extract_moves=f.moves, extract_gunzip=f.gunzip, extract_merge=True, extract_subfolder=f.extract_from,
        ))
    return plans


def _files_of(ds: TvDataset, split: str | None) -> list:
    """The files of one split (and those of none); without a split, those of the class's
    ``default_splits`` when it names some (its years or versions would collide or weigh
    terabytes), else every file."""
    if split is None:
        wanted = set(ds.default_splits)
        return [f for f in ds.files if not wanted or not f.splits or wanted & set(f.splits)]
    known = sorted({s for f in ds.files for s in f.splits})
    if split not in known:
        raise UnknownDatasetError(f"torchvision:{ds.name} has no split {split!r}"
                                  + (f"; its splits: {', '.join(known)}" if known else " (it has no splits)"))
    return [f for f in ds.files if not f.splits or split in f.splits]


def _refuse_clashes(plans: Sequence[FilePlan]) -> None:
    """Two different files the classes save under one name (VOC 2008's archive is saved as
    2012's): planning drops the second plan of a path, so say so instead of placing one."""
    by_path: dict[Path, FilePlan] = {}
    for plan in plans:
        other = by_path.setdefault(plan.final, plan)
        if other.spec.url != plan.spec.url and other.spec.expected != plan.spec.expected:
            raise UsageError(f"{other.dataset} ({other.spec.name}) and {plan.dataset} ({plan.spec.name}) are both "
                             f"saved as {plan.final}, as torchvision names them: get them in two commands "
                             f"(the later one's file stays under that name) or into different --root dirs")


def plan_weights(tables: TorchvisionTables, model: str, entry: str | None, *, hub: Path) -> FilePlan:
    """The checkpoint of one weights entry, at torch.hub's own name under ``hub``."""
    weights = tables.weights_for(model, entry)
    given = ExpectedHash("sha256", weights.sha256) if weights.sha256 else None
    return _hub_plan(tables, weights.url, hub=hub, dataset=f"torchvision:{model}.{weights.entry}", expected=given,
                     name=weights.name, alternates=weights.mirrors)


def _hub_plan(tables: TorchvisionTables, url: str, *, hub: Path, dataset: str,
              expected: ExpectedHash | None = None, name: str | None = None,
              alternates: tuple[str, ...] = ()) -> FilePlan:
    name = name or PurePosixPath(urlsplit(url).path).name
    if not name or name in (".", ".."):
        raise UsageError(f"cannot tell a checkpoint file name from {redact_url(url)!r}")
    expected = expected or tables.hub_expected(name)
    spec = FileSpec(name=name, url=url, target=str(hub / name), expected=expected, alternates=alternates)
    return FilePlan(dataset=dataset, spec=spec, final=hub / name, also=(), extract_into=())


def plan_hub_urls(urls: Sequence[tuple[str, ExpectedHash | None]], ctx: PlanContext) -> list[FilePlan]:
    """``prefetch get URL --torch-hub``: each (URL, given hash) into torch.hub's checkpoints.

    Checked by the given hash, else a full sha256 known for that name, else the sha256
    prefix in the name as torch.hub checks it (a name without one: not verified).
    """
    tables = _tables(ctx)
    hub = checkpoints_dir(ctx)
    for url, _ in urls:
        check_url(url)
    # (the dataset is what a job's record and `status --json` show for each file: no password, no signature)
    return [_hub_plan(tables, url, hub=hub, dataset=shown_url(url), expected=given) for url, given in urls]


def _tables(ctx: PlanContext) -> TorchvisionTables:
    from prefetch.cache.torchvision import load_tables

    return load_tables(extra_files=[Path(r) for r in ctx.request.registries], config_dir=ctx.config)


def split_name(name: str) -> tuple[str, str | None]:
    """``torchvision:resnet50.IMAGENET1K_V1`` -> ("resnet50", "IMAGENET1K_V1"); a class -> (name, None)."""
    body = name[len(PREFIX):].strip()
    model, _, entry = body.partition(".")
    return model, (entry or None)


class TorchvisionPlanner(Planner):
    """``torchvision:<DatasetClass>``, ``torchvision:<model>`` and ``torchvision:<model>.<ENTRY>``."""

    kind = "torchvision"

    def claims(self, name: str) -> bool:
        return name[: len(PREFIX)].lower() == PREFIX

    def check(self, names: Sequence[str], ctx: PlanContext) -> None:
        request = ctx.request
        if request.root is not None and not names:
            raise UsageError("--root is where torchvision datasets go: use it with torchvision:<Class> names")
        if names and (request.sha256 or request.md5 or request.output):
            raise UsageError("--sha256, --md5 and -o apply to a single URL; torchvision: names carry their own hashes")

    def plan(self, names: Sequence[str], ctx: PlanContext) -> list[FilePlan]:
        if not names:
            return []
        from prefetch.cache.registry import load_registry

        tables = _tables(ctx)
        root = dataset_root(ctx.request)
        keras_registry = None
        plans: list[FilePlan] = []
        for name in names:
            model, entry = split_name(name)
            if not model:
                raise UsageError(f"{name!r}: give a dataset class or a model, e.g. torchvision:CIFAR10 "
                                 f"or torchvision:resnet50")
            if model.lower() in tables.weights:
                plans.append(plan_weights(tables, model.lower(), entry, hub=checkpoints_dir(ctx)))
                continue
            ds = tables.dataset(model)
            if keras_registry is None and any(f.keras for f in ds.files):
                keras_registry = load_registry(extra_files=[Path(r) for r in ctx.request.registries],
                                               config_dir=ctx.config)
            plans += plan_dataset(ds, root=root, keras_root=ctx.root, keras_registry=keras_registry, split=entry)
        _refuse_clashes(plans)
        return plans

    def pin(self, request: GetRequest, env: Mapping[str, str]) -> GetRequest:
        """The datasets' root and torch.hub's checkpoints dir, fixed now: a relative ``TORCH_HOME`` (or
        ``XDG_CACHE_HOME``) is the caller's, and the worker starts elsewhere."""
        claimed = any(self.claims(n) for n in request.names)
        if claimed:
            request = dataclasses.replace(request, root=str(dataset_root(request)))
        if request.torch_hub and request.output_dir and not request.torch_checkpoints:
            from prefetch.cache.torchvision import given_hub_dir

            request = dataclasses.replace(request, torch_checkpoints=str(given_hub_dir(request.output_dir) / "checkpoints"))
        if (claimed or request.torch_hub) and not request.torch_checkpoints:
            from prefetch.cache.torchvision import torch_hub_dir

            try:
                request = dataclasses.replace(request, torch_checkpoints=str(torch_hub_dir(env).absolute()))
            except UsageError:
                pass  # a bad TORCH_HOME: the worker says so, if it needs the dir
        return request


def checkpoints_dir(ctx: PlanContext) -> Path:
    """torch.hub's checkpoints dir: as pinned for a background job, else ``--torch-hub -P DIR``'s
    (``torch.hub.set_dir(DIR)``: ``DIR/checkpoints``), else from the environment."""
    from prefetch.cache.torchvision import torch_hub_dir

    if ctx.request.torch_checkpoints:
        return Path(ctx.request.torch_checkpoints)
    if ctx.request.torch_hub and ctx.request.output_dir:
        from prefetch.cache.torchvision import given_hub_dir

        return given_hub_dir(ctx.request.output_dir) / "checkpoints"
    return torch_hub_dir(ctx.env)


PLANNER = TorchvisionPlanner()
