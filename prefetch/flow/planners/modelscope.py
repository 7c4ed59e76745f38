"""``ms://OWNER/NAME[@REV]`` and ``ms://datasets/OWNER/NAME`` into ModelScope's cache (``prefetch.ms``).

A repo is planned without the network; when it runs, its file list is read from the
endpoint, ``--include``/``--exclude`` select files, and each file goes through the same
``fetch_files`` as every other file (resume, locks, sha256, atomic placement) with a
client that keeps the token on the endpoint's origin.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from prefetch.engine.options import TransferOptions
from prefetch.errors import ExitCode, InterruptedTransferError, PrefetchError, UsageError
from prefetch.flow.planners.base import (MS_ENDPOINT_VARIABLES, PlanContext, Planner, RunContext,
                                          endpoint_variable, pinned_endpoint)
from prefetch.flow.request import GetRequest
from prefetch.fs.locks import hold_lock
from prefetch.model.events import Event, EventKind
from prefetch.model.plans import FileResult
from prefetch.model.specs import MS_SCHEME, named_by

if TYPE_CHECKING:  # ms.plan, ms.api (and hf's) load when an ms:// name is planned
    from prefetch.ms.plan import MsPlan


class ModelScopePlanner(Planner):
    """A repo's files become ``FilePlan`` s once its listing is read (when it runs)."""

    kind = "ms"
    flat_mirrors = False  # --mirror names the ModelScope endpoint

    def claims(self, name: str) -> bool:
        return named_by(name, MS_SCHEME)  # (ms.names.is_ms_name, without importing ms/ at start-up)

    def check(self, names: Sequence[str], ctx: PlanContext) -> None:
        if names and len(ctx.request.mirrors) > 1:
            raise UsageError("with ms:// names, --mirror names one ModelScope endpoint (a URL or a mirrors.toml name)")
        if names and (ctx.request.sha256 or ctx.request.md5 or ctx.request.output):
            raise UsageError("ms:// files are checked by the sha256 the endpoint lists and go to ModelScope's "
                             "cache; --sha256/--md5/-o do not apply")

    def plan(self, names: Sequence[str], ctx: PlanContext) -> list[MsPlan]:
        if not names:
            return []
        from prefetch.ms.plan import plan_ms

        request = ctx.request
        return plan_ms(names, include=request.include, exclude=request.exclude,
                       endpoint=request.mirrors[0] if request.mirrors else None, cache=request.ms_cache,
                       env=pinned_endpoint(ctx.env, MS_ENDPOINT_VARIABLES, request.ms_endpoint), config=ctx.config)

    def run(self, plans: Sequence[MsPlan], ctx: RunContext) -> list[FileResult]:
        from prefetch.ms.names import repo_dir

        results: list[FileResult] = []
        for plan in plans:
            try:
                if ctx.stop.is_set():
                    raise InterruptedTransferError(f"{plan.label}: not started (stopped)")
                with hold_lock(ctx.state / "locks", repo_dir(plan.root, plan.repo), timeout=6 * 3600.0,
                               job=ctx.options.job, stop=ctx.stop):
                    results += fetch_repo(plan, ctx)
            except PrefetchError as exc:
                ctx.on_event(Event(EventKind.FAILED, plan.label, message=str(exc), exit_code=int(exc.exit_code)))
                results.append(FileResult(dataset=plan.label, name=plan.label, path=str(plan.snapshot),
                                          paths=[str(plan.snapshot)], error=str(exc), exit_code=int(exc.exit_code),
                                          status="interrupted" if exc.exit_code == ExitCode.INTERRUPTED else "failed"))
        return results

    def pin(self, request: GetRequest, env: Mapping[str, str]) -> GetRequest:
        """The cache root, fixed now (MODELSCOPE_CACHE or ~/.cache/modelscope), for a background job."""
        if not any(self.claims(n) for n in request.names):
            return request
        request = dataclasses.replace(  # (planners/base.py, pinned_endpoint)
            request, ms_endpoint=request.ms_endpoint or endpoint_variable(env, MS_ENDPOINT_VARIABLES))
        if request.ms_cache:  # (given: made absolute, the worker runs elsewhere)
            from prefetch.fs.paths import expand_path

            return dataclasses.replace(request, ms_cache=str(expand_path(request.ms_cache, "ms_cache").absolute()))
        from prefetch.ms.names import ms_cache_root

        return dataclasses.replace(request, ms_cache=str(ms_cache_root(env).absolute()))


def fetch_repo(plan: MsPlan, ctx: RunContext) -> list[FileResult]:
    """List ``plan``'s repo, then fetch the selected files; their results, then the repo's.

    Raises:
        HubAccessError / NetworkError: the listing was refused or could not be read.
        UsageError: no file matches the patterns.
    """
    from prefetch.hf.plan import select_files
    from prefetch.hf.api import max_listed_files
    from prefetch.ms import api
    from prefetch.ms.plan import file_plans
    from prefetch.ms.names import ms_token
    from prefetch.ms.records import write_record

    started = time.monotonic()
    token = ms_token(ctx.env)
    factory = api.client_factory(plan.endpoint, token)
    transfer: TransferOptions = ctx.options.transfer
    client = factory(timeouts=transfer.timeouts)
    try:
        files = api.list_files(client, plan.endpoint, plan.repo, token=bool(token),
                               backoff=(transfer.backoff_base, min(transfer.backoff_cap, 8.0)),
                               max_files=max_listed_files(ctx.env))
    finally:
        client.close()
    chosen = select_files(files, include=plan.include, exclude=plan.exclude)
    if not chosen:
        patterns = " ".join([*(f"--include {p}" for p in plan.include), *(f"--exclude {p}" for p in plan.exclude)])
        raise UsageError(f"{plan.label}: no file of its {len(files)} matches {patterns or 'the selection'}")
    planned = file_plans(plan, chosen, listed=files)  # (refuses a listing it cannot place, before any change)
    if plan.marker is not None:
        plan.marker.unlink(missing_ok=True)  # complete again only once this run has placed every file
    from prefetch.flow.file_list import fetch_files  # (at run time: planning a -b job needs no engine)

    from prefetch.hf.repo_progress import RepoProgress

    # The repo's own row (status, a job's record): its summed bytes, rate and ETA, as for hf:// repos.
    progress = RepoProgress(plan.label, sum(f.size for f in chosen), ctx.on_event)
    progress.start()

    def file_done(i: int, result: FileResult) -> None:
        if result.status in ("downloaded", "cached"):
            progress.finish_file(planned[i].label, result.size)

    options = dataclasses.replace(ctx.options, client_factory=factory)
    results = fetch_files(planned, options=options, state=ctx.state, on_event=progress.files_sink,
                          stop=ctx.stop, on_file_done=file_done)
    failed = [r for r in results if r.status in ("failed", "interrupted")]
    summary = FileResult(dataset=plan.label, name=plan.label, path=str(plan.snapshot), paths=[str(plan.snapshot)],
                         size=sum(f.size for f in chosen), elapsed=time.monotonic() - started,
                         downloaded=sum(r.downloaded for r in results), reused=sum(r.reused for r in results),
                         algorithm="sha256", verified=not failed and all(f.sha256 for f in chosen))
    if failed:
        first = next((r for r in failed if r.exit_code != int(ExitCode.INTERRUPTED)), failed[0])
        summary.status, summary.exit_code = first.status, first.exit_code
        summary.error = f"{plan.label}: {len(failed)} of {len(results)} file(s) not in place; first: {first.error}"
    else:
        if plan.marker is not None:
            write_record(plan.marker, label=plan.label, snapshot=plan.snapshot, endpoint=plan.endpoint,
                         sha256={f.path: f.sha256 for f in chosen})
        summary.status = "downloaded" if any(r.status == "downloaded" for r in results) else "cached"
        rate = summary.downloaded / summary.elapsed if summary.elapsed > 0 else 0.0
        ctx.on_event(Event(EventKind.DONE if summary.status == "downloaded" else EventKind.CACHED, plan.label,
                           done=summary.size, total=summary.size, elapsed=summary.elapsed, rate=rate,
                           message=f"{len(results)} file(s) verified -> {plan.snapshot}"))
    return [*results, summary]


PLANNER = ModelScopePlanner()
