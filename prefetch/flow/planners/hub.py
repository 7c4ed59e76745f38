"""``hf://ORG/NAME[@REV]`` repos into the Hugging Face cache (the work is in ``prefetch.hf``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from prefetch.errors import UsageError
from prefetch.flow.planners.base import (HF_ENDPOINT_VARIABLES, MS_ENDPOINT_VARIABLES, PlanContext, Planner,
                                          RunContext, endpoint_variable, pinned_endpoint)
from prefetch.flow.request import GetRequest
from prefetch.model.plans import FileResult
from prefetch.model.specs import HF_SCHEME, named_by

if TYPE_CHECKING:  # hf.plan, hf.download and ms.alternate load when a hub name is planned
    from prefetch.hf.plan import HubPlan


class HubPlanner(Planner):
    """A repo is planned without the network; its file list is read from the Hub when it runs."""

    kind = "hf"
    flat_mirrors = False  # --mirror names the Hub endpoint (hf-mirror, or a URL)

    def claims(self, name: str) -> bool:
        return named_by(name, HF_SCHEME)  # (hf.names.is_hub_name, without importing hf/ at start-up)

    def check(self, names: Sequence[str], ctx: PlanContext) -> None:
        request = ctx.request
        if (request.include or request.exclude) and not names and not any(n.lower().startswith("ms://")
                                                                          for n in request.names):
            raise UsageError("--include and --exclude select files of hf:// and ms:// repos: "
                             "`prefetch get hf://ORG/NAME --include '*.json'`")
        if names and len(request.mirrors) > 1:
            raise UsageError("with hf:// names, --mirror names one Hugging Face endpoint (hf-mirror, or a URL)")
        if request.lfs_from and len(names) != 1:
            raise UsageError("--lfs-from names the ModelScope copy of one hf:// repo: "
                             "`prefetch get hf://ORG/NAME --lfs-from ms://OWNER/NAME`")

    def plan(self, names: Sequence[str], ctx: PlanContext) -> list[HubPlan]:
        if not names:
            return []
        from prefetch.hf.plan import plan_hub
        from prefetch.ms.alternate import LfsCopies

        request = ctx.request
        plans = plan_hub(names, include=request.include, exclude=request.exclude,
                         endpoint=request.mirrors[0] if request.mirrors else None, cache=request.hub_cache,
                         env=pinned_endpoint(ctx.env, HF_ENDPOINT_VARIABLES, request.hub_endpoint),
                         config=ctx.config)
        if request.lfs_from:  # one repo (check): its LFS files may also come from ModelScope
            copies = LfsCopies(request.lfs_from, env=pinned_endpoint(ctx.env, MS_ENDPOINT_VARIABLES,
                                                                     request.ms_endpoint), config=ctx.config)
            plans = [dataclasses.replace(plans[0], copies=copies)]
        return plans

    def run(self, plans: Sequence[HubPlan], ctx: RunContext) -> list[FileResult]:
        from prefetch.hf.download import run_hub_plans

        options = ctx.options
        return run_hub_plans(plans, transfer=options.transfer, state=ctx.state, env=ctx.env, on_event=ctx.on_event,
                             stop=ctx.stop, job=options.job, force=options.force)

    def pin(self, request: GetRequest, env: Mapping[str, str]) -> GetRequest:
        """The Hugging Face cache root, fixed now (HF_HUB_CACHE, HF_HOME...); a ``--cache-dir``
        given made absolute (the worker runs in the jobs folder, not where it was typed); and the
        endpoint variables the names read (``pinned_endpoint``)."""
        if not any(self.claims(n) for n in request.names):
            return request
        request = dataclasses.replace(
            request, hub_endpoint=request.hub_endpoint or endpoint_variable(env, HF_ENDPOINT_VARIABLES),
            ms_endpoint=request.ms_endpoint or (endpoint_variable(env, MS_ENDPOINT_VARIABLES) if request.lfs_from
                                                else None))
        if request.hub_cache:
            from prefetch.fs.paths import expand_path

            return dataclasses.replace(request, hub_cache=str(expand_path(request.hub_cache, "--cache-dir").absolute()))
        from prefetch.hf.names import hub_cache_root

        return dataclasses.replace(request, hub_cache=str(hub_cache_root(env).absolute()))


PLANNER = HubPlanner()
