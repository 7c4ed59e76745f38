"""Planning and running a ``get`` request: each name to its kind's planner, then the plans to the flow.

The foreground CLI, the background worker and the Python API all build a
``GetRequest`` and call ``run_request``; ``plan_request`` alone checks a request
(a background job's usage errors are reported before it detaches).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, Mapping

from prefetch.cache.layout import keras_root
from prefetch.errors import UsageError
from prefetch.flow.options import FetchOptions
from prefetch.flow.planners import PLANNERS, group_names, urls
from prefetch.flow.planners.base import PlanContext, Planner, RunContext
from prefetch.flow.request import GetRequest, check_password_given, parse_headers
from prefetch.fs.paths import config_dir, state_dir
from prefetch.model.events import EventSink, ignore_event
from prefetch.model.plans import FilePlan, FileResult
from prefetch.net.urls import check_url, is_url


def plan_request(request: GetRequest, *, env: Mapping[str, str] | None = None) -> tuple[list, FetchOptions]:
    """Resolve names and URLs to plans (``FilePlan`` s, and a kind's own plans) and the fetch options.

    Raises:
        UsageError (and subclasses): unknown dataset, bad URL or hash, bad flags.
    """
    groups, options = _plan_groups(request, env=os.environ if env is None else env)
    return [plan for _, plans in groups for plan in plans], options


class Planned:
    """A request planned once (:func:`plan_once`), for :func:`run_request` to run without
    planning it again (a list of thousands of URLs costs ~0.1 ms of planning a file)."""

    __slots__ = ("request", "env", "groups", "options")

    def __init__(self, request: GetRequest, env: Mapping[str, str], groups, options: FetchOptions) -> None:
        self.request, self.env, self.groups, self.options = request, env, groups, options


def plan_once(request: GetRequest, *, env: Mapping[str, str] | None = None) -> Planned:
    """``plan_request``'s checks (its usage errors raised now), kept for ``run_request(planned=...)``.

    Raises:
        UsageError (and subclasses): as :func:`plan_request`.
    """
    env = os.environ if env is None else env
    groups, options = _plan_groups(request, env=env)
    return Planned(request, env, groups, options)


def _plan_groups(request: GetRequest, *, env: Mapping[str, str]) -> tuple[list[tuple[Planner, list]], FetchOptions]:
    """(planner, its plans) per kind of name, in order of first appearance, and the fetch options."""
    if not request.names and not request.urls:
        raise UsageError("nothing to get: give dataset names or URLs (`prefetch list` shows datasets)")
    if request.connections is not None and request.connections < 1:
        raise UsageError(f"--connections must be 1 or more, got {request.connections}")
    by_kind = group_names(request.names)
    if request.urls:  # -i entries are plain URLs, after the command line's names
        by_kind.setdefault(urls.PLANNER, [])
    own_mirrors = [p for p in by_kind if not p.flat_mirrors]
    if own_mirrors and request.mirrors and len(by_kind) > 1:
        raise UsageError(f"with {own_mirrors[0].kind} names, --mirror is read by that kind alone: "
                         f"get {own_mirrors[0].kind} names and others in separate commands")
    if request.mirrors_from_env:  # (a job's PREFETCH_DATASET_MIRROR: its password given again by this shell)
        request = _env_mirrors_again(request, env)
    for mirror in request.mirrors:  # (a resumed job's, read from its record)
        if request.mirrors_from_env:
            check_password_given(mirror, f"the job was started with PREFETCH_DATASET_MIRROR={mirror}",
                                 "set PREFETCH_DATASET_MIRROR to it again in this shell and resume")
        check_password_given(mirror, f"--mirror {mirror}", "run the same `prefetch get ... --mirror URL` again "
                                                            "(it resumes from the bytes on disk)")
    ctx = PlanContext(request=request, env=env, config=config_dir(env),
                      root=keras_root(cache_dir=request.cache_dir, env=env))
    for planner in PLANNERS:  # every kind checks its flags, even with none of its names (--include alone)
        planner.check(by_kind.get(planner, []), ctx)
    groups: list[tuple[Planner, list]] = []
    seen: set[Path] = set()
    name_max: dict[str, int] = {}  # per parent directory: one pathconf walk per folder, not per file
    for planner, names in by_kind.items():
        plans = []
        for plan in planner.plan(names, ctx):
            if isinstance(plan, FilePlan):
                for path in plan.paths:
                    check_name_length(path, name_max)
            if plan.final in seen:
                continue
            seen.add(plan.final)
            plans.append(plan)
        groups.append((planner, plans))
    check_partial_clash(seen)
    check_proxy_env(env)
    flat = any(p.flat_mirrors for p in by_kind)
    bases = tuple(resolve_mirror(m, config=ctx.config) for m in requested_mirrors(request, env)) if flat else ()
    seed = resolve_mirror(request.seed, config=ctx.config) if request.seed else None
    if seed is not None and not seed.startswith("s3://"):
        raise UsageError(f"--seed needs a team store, s3://BUCKET/PREFIX, got {request.seed!r}")
    # A kind that reads its own mirror may plan files whose URLs are store objects (nltk: from s3://).
    store_urls = any(isinstance(plan, FilePlan) and any(u[:5].lower() == "s3://" for u in plan.spec.urls)
                     for _, plans in groups for plan in plans)
    return groups, _fetch_options(request, env, bases, seed, store_urls=store_urls)


def _env_mirrors_again(request: GetRequest, env: Mapping[str, str]) -> GetRequest:
    """A job's mirrors pinned from ``PREFETCH_DATASET_MIRROR`` (its record keeps a password as
    ``***``) with the password of the same mirror (user, host and path) that ``env`` sets again:
    a resume from a shell that set the variable again, and its worker. Another mirror the
    variable names now gets nothing of it (the job's mirror is refused, not swapped)."""
    from dataclasses import replace

    from prefetch.flow.request import hide_url_password

    given = (m.strip() for m in env.get("PREFETCH_DATASET_MIRROR", "").split(","))
    again = {hide_url_password(m): m for m in given if m}
    mirrors = [again.get(m, m) for m in request.mirrors]
    return replace(request, mirrors=mirrors) if mirrors != request.mirrors else request


def _fetch_options(request: GetRequest, env: Mapping[str, str], bases: tuple[str, ...],
                   seed: str | None, *, store_urls: bool = False) -> FetchOptions:
    from prefetch.engine.options import TransferOptions

    limiter = None
    tuning: dict = {}
    if request.limit_rate is not None and request.limit_rate != "":
        from prefetch.engine.ratelimit import RateLimiter, parse_rate

        rate = parse_rate(request.limit_rate)
        limiter = RateLimiter(rate)
        # Slowed on purpose, a connection is not stalled: the stall floor follows the limit.
        tuning["stall_min_rate"] = min(TransferOptions.stall_min_rate, rate / 64)
    transfer = TransferOptions.from_env(env, connections=request.connections, limiter=limiter,
                                        host_connections=request.host_connections,
                                        headers=parse_headers(request.headers), max_attempts=request.retries,
                                        timeout=request.timeout, **tuning)
    return FetchOptions(
        transfer=transfer,
        force=request.force,
        # The seed store is read first; the other sources fetch what it lacks.
        mirrors=tuple(dict.fromkeys(((seed,) if seed else ()) + bases)),
        use_origin=request.also_origin or not bases,
        fail_fast=request.fail_fast,
        job=request.job,
        url_mirrors=bool(request.mirrors) and not request.mirrors_from_env,
        # The store's client waits as the downloads do (--timeout too, not only PREFETCH_*TIMEOUT).
        sources=_store_sources(bases, seed, env, store_urls=store_urls, timeouts=transfer.timeouts),
    )


# prefetch adds up to this many bytes to a file name for its in-flight files:
# ".<name>.part.json.<pid>-<8 hex>.tmp" (the state file's temp name).
IN_FLIGHT_EXTRA = len("..part.json.") + 10 + len("-12345678.tmp")


def check_name_length(path: Path, name_max: dict[str, int] | None = None) -> None:
    """Refuse a file name the filesystem cannot hold together with prefetch's suffixes.

    ``name_max``: the limits already looked up, by parent directory's path (filled in here).

    Raises:
        UsageError: the name is longer than NAME_MAX (usually 255 bytes) minus what
            prefetch appends for its partial, state and temp files.
    """
    folder_name, name = os.path.split(str(path))  # (pathlib's .parent per file cost more than the rest)
    size = len(os.fsencode(name))
    limit = name_max.get(folder_name) if name_max is not None else None
    if limit is None:
        limit = 255
        folder = Path(folder_name or ".")
        for parent in (folder, *folder.parents):
            try:
                limit = os.pathconf(parent, "PC_NAME_MAX")
                break
            except (OSError, ValueError):
                continue
        # (once per folder) a folder to be made whose name no filesystem here can hold: said now,
        # as for the file's own name, not as 'File name too long' after the folders above it were made
        long = next((c for c in folder.parts if len(os.fsencode(c)) > limit), None)
        if long is not None:
            raise UsageError(f"folder name too long: {long[:40]}... is {len(os.fsencode(long))} bytes; this "
                             f"filesystem allows {limit}: give a shorter out= or -o PATH")
        if name_max is not None:
            name_max[folder_name] = limit
    if size + IN_FLIGHT_EXTRA > limit:
        raise UsageError(
            f"file name too long: {name[:40]}... is {size} bytes; this filesystem allows {limit} "
            f"and prefetch needs {IN_FLIGHT_EXTRA} more for its partial and state files, so at most "
            f"{limit - IN_FLIGHT_EXTRA}: give -o PATH with a shorter name"
        )


PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def check_partial_clash(finals: set[Path]) -> None:
    """Refuse two files of one get where one's final path is the other's ``.part`` or ``.part.json``
    (``X`` and ``X.part`` into one folder): fetching ``X`` would overwrite or remove the other.

    Raises:
        UsageError: such a pair.
    """
    paths = {str(f) for f in finals}  # (strings: 0.05 s for 100,000 files, with Paths 0.63 s)
    for final in paths:
        for other in (final + ".part", final + ".part.json"):
            if other in paths:
                raise UsageError(f"{other} is both a file to fetch and where {os.path.basename(final)} is downloaded"
                                 " to; get them into different folders")


_ENCODE_CREDENTIALS = "percent-encode a / ? # \\ or @ in the user name or password"


def check_proxy_env(env: Mapping[str, str]) -> None:
    """Refuse a malformed proxy variable now, with its name, rather than in the middle of a download.

    Raises:
        UsageError: e.g. ``https_proxy='http://[::1'``.
    """
    from urllib.parse import urlsplit

    from prefetch.net.proxies import misread_scheme, shown_proxy

    for var in PROXY_VARIABLES:
        value = env.get(var)
        if not value:
            continue
        if misread_scheme(value) and not (var.isupper() and var.lower() in env):  # (the lower-case one is read)
            raise UsageError(f"{var}={shown_proxy(value)!r} has no scheme, so requests cannot read it: "
                             f"write it as http://{shown_proxy(value.strip())}")
        try:
            parts = urlsplit(value if "://" in value else "http://" + value)
            parts.port  # noqa: B018 - raises ValueError on a bad port
            host = parts.hostname
        except ValueError as exc:
            # (the parser's words may quote a piece of a password holding "/", "?" or "#")
            why = _ENCODE_CREDENTIALS if "@" in value else exc
            raise UsageError(f"{var}={shown_proxy(value)!r} is not a valid proxy URL ({why}); fix it or unset it") from None
        if "\\" in parts.netloc:  # (Python reads past a backslash; urllib3 2.8 ends the host there, as a browser does)
            why = _ENCODE_CREDENTIALS if "@" in value else "a backslash in its host"
            raise UsageError(f"{var}={shown_proxy(value)!r} is not a valid proxy URL ({why}); fix it or unset it")
        if "@" in value and "@" not in parts.netloc:
            # (a password with a / ? or # not percent-encoded whose part before it is a number,
            # alice:1234/x@proxy: every parser reads host alice, port 1234, and requests went there)
            raise UsageError(f"{var}={shown_proxy(value)!r} is not a valid proxy URL ({_ENCODE_CREDENTIALS}); "
                             f"fix it or unset it")
        if not host:
            raise UsageError(f"{var}={shown_proxy(value)!r} is not a valid proxy URL (no host); fix it or unset it")
        if any(c.isspace() or ord(c) < 32 for c in host):  # (requests refuses every request through it)
            raise UsageError(f"{var}={shown_proxy(value)!r} is not a valid proxy URL (a space or control character "
                             f"in its host {host!r}); fix it or unset it")


def _store_sources(bases: tuple[str, ...], seed: str | None, env: Mapping[str, str], *, store_urls: bool = False,
                   timeouts=None):
    """The hook that reads (and seeds) ``s3://`` stores, when any is involved; boto3 is needed then."""
    if seed is None and not store_urls and not any(b.startswith("s3://") for b in bases):
        return None
    from prefetch.store.s3 import require_boto3
    from prefetch.store.seed import StoreSources

    require_boto3()  # one line saying what to install, before any download starts
    lease = env.get("PREFETCH_SEED_LEASE")
    return StoreSources(seed=seed, env=dict(env), state_dir=state_dir(env), timeouts=timeouts,
                        **({"lease": _seconds("PREFETCH_SEED_LEASE", lease)} if lease else {}))


def _seconds(name: str, value: str) -> float:
    """A number of seconds more than 0 from the environment variable ``name``.

    Raises:
        UsageError: anything else (one line, exit 2).
    """
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0:
        raise UsageError(f"{name}={value!r}: must be a number of seconds more than 0")
    return seconds


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
    before_start: Callable[[int], bool] | None = None,
    on_file_done: Callable[[int, FileResult], None] | None = None,
    planned: Planned | None = None,
) -> list[FileResult]:
    """Plan and fetch everything in ``request``; per-file results (failures included).

    Every ``FilePlan``, whatever kind of name it came from, goes through one
    ``fetch_files`` (``before_start``/``on_file_done`` are its hooks, for those files:
    indices count the ``FilePlan`` s in plan order); a kind's own plans (hub repos) are run
    by its planner after them and do not call the hooks. All of them share one connection
    budget, the warm connections and the route judgement per host.

    ``planned``: this very request already planned by :func:`plan_once`: run as planned, in
    the environment it was planned in (``env`` is then that one or None).

    Raises:
        ValueError: ``planned`` was made for another request or environment (a caller's bug).
    """
    from dataclasses import replace

    from prefetch.engine.many import shared_hosts

    if planned is not None:
        if planned.request is not request or env not in (None, planned.env):
            raise ValueError("run_request: planned= was made for another request or environment")
        env, groups, options = planned.env, planned.groups, planned.options
    else:
        env = os.environ if env is None else env
        groups, options = _plan_groups(request, env=env)
    stop = stop or threading.Event()
    state = state_dir(env)
    transfer = options.transfer
    if transfer.slots_dir is None and transfer.hosts is None:
        # One connection budget per host for this user's processes on this machine (engine/shared_budget.py).
        transfer = replace(transfer, slots_dir=str(state / "slots"))
    transfer, hosts = shared_hosts(transfer, on_event, stop)
    options = replace(options, transfer=transfer)
    ctx = RunContext(options=options, state=state, env=env, on_event=on_event, stop=stop)
    files = [p for _, plans in groups for p in plans if isinstance(p, FilePlan)]
    from prefetch.flow.file_list import fetch_files  # (not at import: a -b launcher plans, its worker fetches)
    from prefetch.flow.served_names import give_back, name_plans

    handed: dict = {}  # (a name's answer kept for its download: flow/served_names._first_request)
    try:
        files = name_plans(files, options=options, on_event=on_event,  # --content-disposition: one GET each
                           check_name=check_name_length, records_dir=state / "placed", locks_dir=state / "locks",
                           handed=handed)
        if handed:
            options = replace(options, handed=handed)
        results = fetch_files(files, options=options, state=ctx.state, on_event=on_event, stop=stop,
                              before_start=before_start, on_file_done=on_file_done) if files else []
        for planner, plans in groups:
            own = [p for p in plans if not isinstance(p, FilePlan)]
            if own:
                results += planner.run(own, ctx)
    finally:
        give_back(handed)
        if hosts is not None:
            hosts.close()
    return results
