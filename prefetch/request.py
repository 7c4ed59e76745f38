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
    # hf:// names only (prefetch/hf/): file globs and the hub cache root. For them `mirrors`
    # holds the Hub endpoint (one catalog name or URL), not flat dataset mirrors.
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    hub_cache: str | None = None

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
    from prefetch.hf.names import is_hub_name

    env = os.environ if env is None else env
    if not request.names:
        raise UsageError("nothing to get: give dataset names or URLs (`prefetch list` shows datasets)")
    hub_names = [n for n in request.names if is_hub_name(n)]
    names = [n for n in request.names if not is_hub_name(n)]
    if (request.include or request.exclude) and not hub_names:
        raise UsageError("--include and --exclude select files of hf:// repos: `prefetch get hf://ORG/NAME --include '*.json'`")
    if hub_names and request.mirrors and (names or len(request.mirrors) > 1):
        raise UsageError("with hf:// names, --mirror names one Hugging Face endpoint (hf-mirror, or a URL):"
                         " get datasets and hf:// repos in separate commands")
    urls = [n for n in names if is_url(n)]
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
    for name in names:
        if is_url(name):
            spec = spec_for_url(name, output=output_file(request.output, name), expected=expected)
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
    bases = tuple(resolve_mirror(m, config=cfg) for m in requested_mirrors(request, env)) if names else ()
    if hub_names:
        from prefetch.hf.plan import plan_hub

        unique += plan_hub(hub_names, include=request.include, exclude=request.exclude,
                           endpoint=request.mirrors[0] if request.mirrors else None,
                           cache=request.hub_cache, env=env, config=cfg)
    from prefetch.transfer import TransferOptions

    options = FetchOptions(
        transfer=TransferOptions.from_env(env, connections=request.connections),
        mirrors=bases,
        use_origin=request.also_origin or not bases,
        fail_fast=request.fail_fast,
        job=request.job,
    )
    return unique, options


def output_file(output: str | None, url: str) -> Path | None:
    """The file ``-o`` names: inside it when it is a directory or ends in ``/`` (as with cp)."""
    if not output:
        return None
    path = Path(output).expanduser().absolute()
    if output.endswith(("/", os.sep)) or path.is_dir():
        from pathlib import PurePosixPath
        from urllib.parse import urlsplit

        name = PurePosixPath(urlsplit(url).path).name  # as registry.spec_for_url names it
        if name in ("", ".", ".."):
            raise UsageError(f"cannot tell a file name from {url!r}; give -o with a file name")
        return path / name
    return path


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
    env = os.environ if env is None else env
    plans, options = plan_request(request, env=env)
    hub = [p for p in plans if not isinstance(p, FilePlan)]
    files = [p for p in plans if isinstance(p, FilePlan)]
    results = fetch_files(files, options=options, state=state_dir(env), on_event=on_event, stop=stop) if files else []
    if hub:
        from prefetch.hf.fetch import run_hub_plans

        results += run_hub_plans(hub, transfer=options.transfer, state=state_dir(env), env=env, on_event=on_event,
                                 stop=stop, job=options.job)
    return results
