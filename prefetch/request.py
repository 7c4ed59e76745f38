"""A ``get`` request: what the user asked for, turned into file plans and options.

The foreground CLI, the background worker and the Python API all build a
``GetRequest`` and call ``run_request``; a job record stores it as JSON.
"""

from __future__ import annotations

import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping

from prefetch.errors import UsageError
from prefetch.events import EventSink, ignore_event
from prefetch.fetch import FetchOptions, FilePlan, FileResult, fetch_files, plan_files
from prefetch.layout import keras_root
from prefetch.paths import config_dir, state_dir
from prefetch.registry import is_url, load_registry, spec_for_url
from prefetch.verify import parse_hash


@dataclass
class GetRequest:
    """Everything ``prefetch get`` was asked to do (JSON-serialisable)."""

    names: list[str]
    cache_dir: str | None = None
    mirrors: list[str] = field(default_factory=list)
    also_origin: bool = False
    connections: int | None = None
    sha256: str | None = None
    md5: str | None = None
    output: str | None = None
    registries: list[str] = field(default_factory=list)
    fail_fast: bool = False
    job: str | None = None
    retries: int | None = None  # retries in a row without progress (default 8, $PREFETCH_RETRIES)
    timeout: float | None = None  # seconds without a byte before giving up (default 30, $PREFETCH_TIMEOUT)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> "GetRequest":
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def plan_request(request: GetRequest, *, env: Mapping[str, str] | None = None) -> tuple[list[FilePlan], FetchOptions]:
    """Resolve names/URLs to file plans and the fetch options.

    Raises:
        UsageError (and subclasses): unknown dataset, bad URL or hash, bad flags.
    """
    env = os.environ if env is None else env
    if not request.names:
        raise UsageError("nothing to get: give dataset names or URLs (`prefetch list` shows datasets)")
    urls = [n for n in request.names if is_url(n)]
    if (request.sha256 or request.md5 or request.output) and (len(request.names) != 1 or not urls):
        raise UsageError("--sha256, --md5 and -o apply to a single URL: `prefetch get URL -o PATH --sha256 HEX`")
    if request.sha256 and request.md5:
        raise UsageError("give either --sha256 or --md5, not both")
    if request.connections is not None and request.connections < 1:
        raise UsageError(f"--connections must be 1 or more, got {request.connections}")
    expected = None
    if request.sha256:
        expected = parse_hash(request.sha256, algorithm="sha256")
    elif request.md5:
        expected = parse_hash(request.md5, algorithm="md5")
    cfg = config_dir(env)
    registry = None
    root = keras_root(cache_dir=request.cache_dir, env=env)
    plans: list[FilePlan] = []
    for name in request.names:
        if is_url(name):
            output = Path(request.output).expanduser().absolute() if request.output else None
            spec = spec_for_url(name, output=output, expected=expected)
        else:
            if registry is None:
                registry = load_registry(extra_files=[Path(r) for r in request.registries], config_dir=cfg)
            spec = registry.get(name)
        plans.extend(plan_files(spec, root=root))
    if env.get("KERAS_HOME") and root.absolute() == Path(env["KERAS_HOME"]).expanduser().absolute():
        # The root came from KERAS_HOME (directly, or fixed into a background job).
        plans = [add_tf_keras_names(plan, env=env, root=root) for plan in plans]
    seen: dict[Path, str] = {}
    unique = []
    for plan in plans:
        if plan.final in seen:
            continue
        seen[plan.final] = plan.dataset
        unique.append(plan)
    bases = tuple(resolve_mirror(m, config=cfg) for m in requested_mirrors(request, env))
    from prefetch.transfer import TransferOptions

    options = FetchOptions(
        transfer=TransferOptions.from_env(env, connections=request.connections, max_attempts=request.retries,
                                          timeout=request.timeout),
        mirrors=bases,
        use_origin=request.also_origin or not bases,
        fail_fast=request.fail_fast,
        job=request.job,
    )
    return unique, options


def add_tf_keras_names(plan: FilePlan, *, env: Mapping[str, str], root: Path) -> FilePlan:
    """Also place ``plan`` where tf-keras looks, when tf-keras is installed and not reading ``root``.

    tf-keras (Keras 2) ignores KERAS_HOME and always uses ~/.keras; with KERAS_HOME
    set, its legacy names (the target, and extraction into datasets/ itself) are
    added there as hard links (or copies) and a second extraction.
    """
    import dataclasses

    from prefetch.layout import datasets_dir, detect_keras, keras_root

    if os.path.isabs(plan.spec.target):
        return plan
    tf_root = keras_root(env={k: v for k, v in env.items() if k != "KERAS_HOME"})
    if tf_root.absolute() == root.absolute() or not detect_keras().tf_keras:
        return plan
    base = datasets_dir(tf_root)
    legacy_dirs = tuple(base / d for d in plan.spec.extract if d in (".", ""))
    return dataclasses.replace(
        plan,
        also=(*plan.also, base / plan.spec.target),
        extract_into=(*plan.extract_into, *legacy_dirs),
    )


def requested_mirrors(request: GetRequest, env: Mapping[str, str]) -> list[str]:
    """``--mirror`` values, else the comma-separated ``PREFETCH_DATASET_MIRROR``."""
    if request.mirrors:
        return list(request.mirrors)
    return [m.strip() for m in env.get("PREFETCH_DATASET_MIRROR", "").split(",") if m.strip()]


def resolve_mirror(value: str, *, config: Path) -> str:
    """A dataset mirror base URL from a URL or a name in mirrors.toml."""
    if is_url(value):
        from prefetch.registry import check_url

        check_url(value)
        return value if value.endswith("/") else value + "/"
    from prefetch.mirrors import resolve_dataset_mirror

    return resolve_dataset_mirror(value, config_dir=config)


def run_request(
    request: GetRequest,
    *,
    on_event: EventSink = ignore_event,
    stop: threading.Event | None = None,
    env: Mapping[str, str] | None = None,
) -> list[FileResult]:
    """Plan and fetch everything in ``request``; per-file results (failures included)."""
    plans, options = plan_request(request, env=env)
    return fetch_files(plans, options=options, state=state_dir(env), on_event=on_event, stop=stop)
