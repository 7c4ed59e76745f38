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
from prefetch.model.events import EventSink, ignore_event
from prefetch.flow.options import FetchOptions
from prefetch.model.plans import FilePlan, FileResult
from prefetch.flow.files import fetch_files
from prefetch.cache.plans import plan_files
from prefetch.cache.layout import keras_root
from prefetch.fs.paths import config_dir, expand_path, state_dir
from prefetch.net.urls import is_url
from prefetch.cache.registry import load_registry
from prefetch.flow.urls import UrlEntry, plan_url_specs, split_fragment
from prefetch.model.specs import parse_hash

HEADERS_ENV = "PREFETCH_JOB_HEADERS"  # how a background worker gets --header values (never stored)


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
    mirrors_from_env: bool = False  # ``mirrors`` were pinned from PREFETCH_DATASET_MIRROR (not --mirror)
    seed: str | None = None  # s3://BUCKET/PREFIX: read from it, and upload what it lacks
    # Plain URLs from -i files (and the API): {"url", "sha256", "md5", "out", "dir"}.
    urls: list[dict] = field(default_factory=list)
    output_dir: str | None = None  # -P: where URL downloads go (default: the current dir)
    extract: bool = False  # extract URL downloads that are archives
    extract_to: str | None = None  # ... into this dir (default: beside the file)
    limit_rate: str | float | None = None  # total bytes/s of the whole command ("2M")
    headers: list[str] = field(default_factory=list)  # "Name: value" (to_dict keeps names only)
    force: bool = False  # download again even when a good file is in place
    # hf:// names only (prefetch/hf/): file globs and the hub cache root. For them `mirrors`
    # holds the Hub endpoint (one catalog name or URL), not flat dataset mirrors.
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    hub_cache: str | None = None
    retries: int | None = None  # retries in a row without progress (default 8, $PREFETCH_RETRIES)
    timeout: float | None = None  # seconds without a byte before giving up (default 30, $PREFETCH_TIMEOUT)

    def to_dict(self) -> dict:
        """The request as stored in a job record: header values (credentials) left out."""
        data = asdict(self)
        data["headers"] = [h.partition(":")[0].strip() for h in self.headers]
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> "GetRequest":
        """Rebuild a request stored in a job record, every field type-checked.

        Raises:
            UsageError: a field has the wrong type (a hand-edited or damaged record).
        """
        if not isinstance(data, Mapping):
            raise UsageError("the job's stored request is not an object; start again with `prefetch get ... -b`")
        known = {f for f in cls.__dataclass_fields__}
        fields = {k: v for k, v in data.items() if k in known}
        for key, value in fields.items():
            kind = _REQUEST_TYPES[key]
            if kind is dict:  # a list of objects (the -i URL entries)
                ok = isinstance(value, list) and all(isinstance(v, Mapping) for v in value)
            elif kind is list:
                ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
            else:
                ok = value is None or (isinstance(value, kind) and (kind is bool or not isinstance(value, bool)))
            if key in ("names", "also_origin", "fail_fast", "mirrors_from_env", "extract", "force") and value is None:
                ok = False
            if not ok:
                raise UsageError(f"the job's stored request is corrupt: {key!r} is {value!r:.40}; "
                                 f"start again with `prefetch get ... -b`")
        return cls(**fields)


_REQUEST_TYPES = {
    "names": list, "cache_dir": str, "mirrors": list, "also_origin": bool, "connections": int,
    "sha256": str, "md5": str, "output": str, "registries": list, "fail_fast": bool, "job": str,
    "mirrors_from_env": bool, "seed": str, "urls": dict, "output_dir": str, "extract": bool,
    "extract_to": str, "limit_rate": (str, int, float), "headers": list, "force": bool,
    "include": list, "exclude": list, "hub_cache": str, "retries": int, "timeout": (int, float),
}
assert set(_REQUEST_TYPES) == set(GetRequest.__dataclass_fields__), "every stored field is type-checked"


def plan_request(request: GetRequest, *, env: Mapping[str, str] | None = None) -> tuple[list[FilePlan], FetchOptions]:
    """Resolve names/URLs to file plans and the fetch options.

    Raises:
        UsageError (and subclasses): unknown dataset, bad URL or hash, bad flags.
    """
    from prefetch.hf.names import is_hub_name

    env = os.environ if env is None else env
    if not request.names and not request.urls:
        raise UsageError("nothing to get: give dataset names or URLs (`prefetch list` shows datasets)")
    hub_names = [n for n in request.names if is_hub_name(n)]
    names = [n for n in request.names if not is_hub_name(n)]
    if (request.include or request.exclude) and not hub_names:
        raise UsageError("--include and --exclude select files of hf:// repos: `prefetch get hf://ORG/NAME --include '*.json'`")
    if hub_names and request.mirrors and (names or request.urls or len(request.mirrors) > 1):
        raise UsageError("with hf:// names, --mirror names one Hugging Face endpoint (hf-mirror, or a URL):"
                         " get datasets and hf:// repos in separate commands")
    urls = [n for n in names if is_url(n)]
    single = len(request.names) + len(request.urls) == 1 and (urls or request.urls)
    if (request.sha256 or request.md5 or request.output) and not single:
        raise UsageError("--sha256, --md5 and -o apply to a single URL: `prefetch get URL -o PATH --sha256 HEX`; "
                         "for several, use URL#sha256=HEX, or -i FILE with sha256= and out= per line")
    if (request.extract or request.extract_to) and not (urls or request.urls):
        raise UsageError("--extract applies to URL downloads; datasets are extracted where Keras expects them")
    if request.sha256 and request.md5:
        raise UsageError("give either --sha256 or --md5, not both")
    if request.connections is not None and request.connections < 1:
        raise UsageError(f"--connections must be 1 or more, got {request.connections}")
    if request.sha256:
        parse_hash(request.sha256, algorithm="sha256")  # a bad --sha256 is named as such
    elif request.md5:
        parse_hash(request.md5, algorithm="md5")
    cfg = config_dir(env)
    registry = None
    root = keras_root(cache_dir=request.cache_dir, env=env)
    url_specs = iter(plan_url_specs(
        url_entries(request), output_dir=request.output_dir, extract_to=request.extract_to, extract=request.extract,
    ))
    plans: list[FilePlan] = []
    for name in names:
        if is_url(name):
            spec = next(url_specs)
        else:
            if registry is None:
                registry = load_registry(extra_files=[Path(r) for r in request.registries], config_dir=cfg)
            spec = registry.get(name)
        plans.extend(plan_files(spec, root=root))
    for spec in url_specs:  # the -i entries, after the command line's names
        plans.extend(plan_files(spec, root=root))
    if env.get("KERAS_HOME") and root.absolute() == expand_path(env["KERAS_HOME"], "KERAS_HOME").absolute():
        # The root came from KERAS_HOME (directly, or fixed into a background job).
        plans = [add_tf_keras_names(plan, env=env, root=root) for plan in plans]
    for plan in plans:
        for path in plan.paths:
            check_name_length(path)
    check_proxy_env(env)
    seen: dict[Path, str] = {}
    unique = []
    for plan in plans:
        if plan.final in seen:
            continue
        seen[plan.final] = plan.dataset
        unique.append(plan)
    bases = tuple(resolve_mirror(m, config=cfg) for m in requested_mirrors(request, env)) if (names or request.urls) else ()
    seed = resolve_mirror(request.seed, config=cfg) if request.seed else None
    if seed is not None and not seed.startswith("s3://"):
        raise UsageError(f"--seed needs a team store, s3://BUCKET/PREFIX, got {request.seed!r}")
    if hub_names:
        from prefetch.hf.plan import plan_hub

        unique += plan_hub(hub_names, include=request.include, exclude=request.exclude,
                           endpoint=request.mirrors[0] if request.mirrors else None,
                           cache=request.hub_cache, env=env, config=cfg)
    from prefetch.engine.options import TransferOptions

    limiter = None
    tuning: dict = {}
    if request.limit_rate is not None and request.limit_rate != "":
        from prefetch.engine.ratelimit import RateLimiter, parse_rate

        rate = parse_rate(request.limit_rate)
        limiter = RateLimiter(rate)
        # Slowed on purpose, a connection is not stalled: the stall floor follows the limit.
        tuning["stall_min_rate"] = min(TransferOptions.stall_min_rate, rate / 64)
    options = FetchOptions(
        transfer=TransferOptions.from_env(env, connections=request.connections, limiter=limiter,
                                          headers=parse_headers(request.headers), max_attempts=request.retries,
                                          timeout=request.timeout, **tuning),
        force=request.force,
        # The seed store is read first; the other sources fetch what it lacks.
        mirrors=tuple(dict.fromkeys(((seed,) if seed else ()) + bases)),
        use_origin=request.also_origin or not bases,
        fail_fast=request.fail_fast,
        job=request.job,
        url_mirrors=bool(request.mirrors) and not request.mirrors_from_env,
        sources=_store_sources(bases, seed, env),
    )
    return unique, options


# prefetch adds up to this many bytes to a file name for its in-flight files:
# ".<name>.part.json.<pid>-<8 hex>.tmp" (the state file's temp name).
IN_FLIGHT_EXTRA = len("..part.json.") + 10 + len("-12345678.tmp")


def check_name_length(path: Path) -> None:
    """Refuse a file name the filesystem cannot hold together with prefetch's suffixes.

    Raises:
        UsageError: the name is longer than NAME_MAX (usually 255 bytes) minus what
            prefetch appends for its partial, state and temp files.
    """
    name_max = 255
    for parent in (path.parent, *path.parent.parents):
        try:
            name_max = os.pathconf(parent, "PC_NAME_MAX")
            break
        except (OSError, ValueError):
            continue
    size = len(os.fsencode(path.name))
    if size + IN_FLIGHT_EXTRA > name_max:
        raise UsageError(
            f"file name too long: {path.name[:40]}... is {size} bytes; this filesystem allows {name_max} "
            f"and prefetch needs {IN_FLIGHT_EXTRA} more for its partial and state files, so at most "
            f"{name_max - IN_FLIGHT_EXTRA}: give -o PATH with a shorter name"
        )


PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def check_proxy_env(env: Mapping[str, str]) -> None:
    """Refuse a malformed proxy variable now, with its name, rather than in the middle of a download.

    Raises:
        UsageError: e.g. ``https_proxy='http://[::1'``.
    """
    from urllib.parse import urlsplit

    for var in PROXY_VARIABLES:
        value = env.get(var)
        if not value:
            continue
        try:
            parts = urlsplit(value if "://" in value else "http://" + value)
            parts.port  # noqa: B018 - raises ValueError on a bad port
            host = parts.hostname
        except ValueError as exc:
            raise UsageError(f"{var}={value!r} is not a valid proxy URL ({exc}); fix it or unset it") from None
        if not host:
            raise UsageError(f"{var}={value!r} is not a valid proxy URL (no host); fix it or unset it")


def _store_sources(bases: tuple[str, ...], seed: str | None, env: Mapping[str, str]):
    """The hook that reads (and seeds) ``s3://`` stores, when any is involved; boto3 is needed then."""
    if seed is None and not any(b.startswith("s3://") for b in bases):
        return None
    from prefetch.store.s3 import require_boto3
    from prefetch.store.seed import StoreSources

    require_boto3()  # one line saying what to install, before any download starts
    lease = env.get("PREFETCH_SEED_LEASE")
    return StoreSources(seed=seed, env=dict(env), state_dir=state_dir(env),
                        **({"lease": float(lease)} if lease else {}))


def output_file(output: str | None, url: str) -> Path | None:
    """The file ``-o`` names: inside it when it is a directory or ends in ``/`` (as with cp)."""
    if not output:
        return None
    path = expand_path(output, "-o").absolute()
    if output.endswith(("/", os.sep)) or os.path.isdir(path):  # never raises (a name too long is checked later)
        from pathlib import PurePosixPath
        from urllib.parse import urlsplit

        name = PurePosixPath(urlsplit(url).path).name  # as urllist.plan_url_specs names it
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

    from prefetch.cache.layout import datasets_dir, detect_keras, keras_root

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
    if value.strip().lower().startswith("s3://"):
        from prefetch.store.s3 import parse_store_url

        return parse_store_url(value.strip()).url
    if is_url(value):
        from prefetch.net.urls import check_url

        check_url(value)
        return value if value.endswith("/") else value + "/"
    from prefetch.mirrors.catalog import resolve_dataset_mirror

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
        from prefetch.hf.download import run_hub_plans

        results += run_hub_plans(hub, transfer=options.transfer, state=state_dir(env), env=env, on_event=on_event,
                                 stop=stop, job=options.job, force=options.force)
    return results


def url_entries(request: GetRequest) -> list[UrlEntry]:
    """The request's plain URLs in order: those among ``names``, then ``urls`` (-i entries).

    ``--sha256``/``--md5``/``-o`` belong to the single URL (``plan_request`` checks that).
    """
    from prefetch.hf.names import is_hub_name

    entries = []
    for name in request.names:
        if is_url(name) and not is_hub_name(name):  # hf:// repos are planned by prefetch.hf
            out = output_file(request.output, split_fragment(name)[0])
            entries.append(UrlEntry(url=name, sha256=request.sha256, md5=request.md5, out=str(out) if out else None))
    for data in request.urls:
        entry = UrlEntry.from_dict(data)
        if request.output:
            entry.out = str(output_file(request.output, split_fragment(entry.url)[0]))
        entry.sha256 = entry.sha256 or request.sha256
        entry.md5 = entry.md5 or request.md5
        entries.append(entry)
    return entries


def parse_headers(lines: list[str]) -> dict[str, str]:
    """``["Name: value", ...]`` -> {name: value}.

    Raises:
        UsageError: not ``Name: value``, a control character (header injection), or
            a name without its value (a job record keeps header names only).
    """
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = str(line).partition(":")
        name, value = name.strip(), value.strip()
        if not sep:
            raise UsageError(
                f"--header {name!r} has no value: header values (credentials) are never stored in job records, "
                f"so a resumed job cannot send them; run the same `prefetch get ... --header` again (it resumes)"
            )
        if not name or any(c in name for c in " \t()<>@,;:\\\"/[]?={}") or not name.isascii():
            raise UsageError(f"--header needs 'Name: value'; {name!r} is not a header name")
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise UsageError(f"--header {name}: the value holds a control character")
        headers[name] = value
    return headers


def job_environment(request: GetRequest, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a background worker: header values passed here, never in its record.

    The environment of a process is readable only by its user; the worker takes the
    values out of its own environment as soon as it starts.
    """
    import json

    out = dict(os.environ if env is None else env)
    if request.headers:
        out[HEADERS_ENV] = json.dumps(list(request.headers))
    return out


def restore_headers(names: list[str], env: Mapping[str, str]) -> list[str]:
    """Header lines for a worker: the values its launcher passed in ``HEADERS_ENV`` for ``names``."""
    import json

    try:
        passed = json.loads(env.get(HEADERS_ENV) or "[]")
    except ValueError:
        passed = []
    by_name = {str(h).partition(":")[0].strip().lower(): str(h) for h in passed if ":" in str(h)}
    return [by_name.get(str(n).strip().lower(), str(n)) for n in names]


def pin_url_paths(request: GetRequest) -> GetRequest:
    """URL downloads of a background job land where they would in the foreground.

    The worker runs in the jobs directory: ``-P``, ``--extract-to`` and input-file
    ``dir=`` become absolute, and without ``-P`` the current directory is fixed now.
    """
    import dataclasses

    from prefetch.hf.names import is_hub_name

    if not request.urls and not any(is_url(n) and not is_hub_name(n) for n in request.names):
        return request

    def absolute(path: str) -> str:
        return str(Path(path).expanduser().absolute())

    urls = [dict(e, dir=absolute(e["dir"])) if isinstance(e, dict) and e.get("dir") else e for e in request.urls]
    return dataclasses.replace(
        request,
        urls=urls,
        output_dir=absolute(request.output_dir or os.getcwd()),
        extract_to=absolute(request.extract_to) if request.extract_to else None,
    )


def describe_url_options(request: GetRequest) -> list[str]:
    """Command-line words for the URL options of ``request``; header values never appear."""
    parts: list[str] = []
    for data in request.urls:
        entry = UrlEntry.from_dict(data)
        url, _ = split_fragment(entry.url)
        if entry.sha256 or entry.md5:
            url += f"#sha256={entry.sha256}" if entry.sha256 else f"#md5={entry.md5}"
        parts.append(url if not entry.out else f"{url} (out={entry.out})")
    if request.output_dir:
        parts += ["-P", request.output_dir]
    if request.extract:
        parts.append("--extract")
    if request.extract_to:
        parts += ["--extract-to", request.extract_to]
    if request.limit_rate not in (None, ""):
        parts += ["--limit-rate", str(request.limit_rate)]
    for header in request.headers:
        parts += ["--header", f"{header.partition(':')[0].strip()}: ***"]
    return parts
