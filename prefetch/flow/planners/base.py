"""The interface every kind of name implements: claim names, check flags, plan files, run plans.

A kind is a prefix or a shape of name (``hf://ORG/NAME``, ``https://...``, a registry
dataset). Its planner turns the names it claims into plans without touching the
network where it can; the flow runs them. A planner whose plans are ``FilePlan`` s
needs nothing more: ``fetch_files`` runs them with every guarantee (resume, several
sources, verification, extraction, placement, locks), all of a request's files
together. A kind whose plans are something else (a hub repo, resolved file by file
when it runs) implements ``run`` for them.

Adding a kind: one module in this package with a ``Planner`` subclass and a
``PLANNER`` instance, and one line in ``PLANNERS`` (``planners/__init__.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from prefetch.flow.options import FetchOptions
from prefetch.flow.request import GetRequest
from prefetch.model.events import EventSink
from prefetch.model.lean import dataclass
from prefetch.model.plans import FileResult


@dataclass(frozen=True)
class PlanContext:
    """What planning may read: the request, the environment and the resolved places."""

    request: GetRequest
    env: Mapping[str, str]
    config: Path  # the user's config dir (registry.toml, mirrors.toml)
    root: Path  # the Keras root: datasets/ lives under it


@dataclass(frozen=True)
class RunContext:
    """What running plans may use: options, prefetch's state dir, events, the stop flag."""

    options: FetchOptions
    state: Path
    env: Mapping[str, str]
    on_event: EventSink
    stop: threading.Event


class Planner:
    """One kind of name. Subclasses set ``kind`` and implement ``claims`` and ``plan``."""

    kind: ClassVar[str] = ""
    # True: ``--mirror`` values are flat dataset mirrors (``<base>/<file name>``) for this
    # kind. False: the planner reads ``--mirror`` itself (a hub endpoint, a mirror of
    # another layout), so names of this kind cannot share a command with other kinds
    # when ``--mirror`` is given.
    flat_mirrors: ClassVar[bool] = True

    def claims(self, name: str) -> bool:
        """True when ``name`` is of this kind."""
        raise NotImplementedError

    def check(self, names: Sequence[str], ctx: PlanContext) -> None:
        """Refuse flags this kind cannot honour (``UsageError``); ``names`` may be empty."""

    def plan(self, names: Sequence[str], ctx: PlanContext) -> list:
        """The plans for ``names`` (``FilePlan`` s, or plans ``run`` knows), in order.

        Raises:
            UsageError (and subclasses): an unknown or malformed name.
        """
        raise NotImplementedError

    def run(self, plans: Sequence, ctx: RunContext) -> list[FileResult]:
        """Fetch this kind's plans that are not ``FilePlan`` s (those the flow runs itself, all together).

        One ``FileResult`` per file, failures included.
        """
        raise NotImplementedError(f"{type(self).__name__} made plans that only it can run, but has no run()")

    def pin(self, request: GetRequest, env: Mapping[str, str]) -> GetRequest:
        """``request`` made independent of the current directory and environment (for a job)."""
        return request


HF_ENDPOINT_VARIABLES = ("HF_ENDPOINT",)
MS_ENDPOINT_VARIABLES = ("MODELSCOPE_ENDPOINT", "MODELSCOPE_DOMAIN")


def endpoint_variable(env: Mapping[str, str], variables: Sequence[str]) -> str | None:
    """The first of ``variables`` ``env`` sets (a job pins it: ``GetRequest.hub_endpoint``/``ms_endpoint``)."""
    return next((env[v].strip() for v in variables if env.get(v, "").strip()), None)


def pinned_endpoint(env: Mapping[str, str], variables: Sequence[str], pinned: str | None) -> Mapping[str, str]:
    """``env``, with a job's pinned endpoint as ``variables[0]`` when it sets none of them: a resume
    from a fresh shell (a restarted kernel, a terminal) asks the Hub the job started with, not the
    default one (huggingface.co, which the notebook's HF_ENDPOINT was set to avoid); a shell that
    sets one of them chooses."""
    if pinned and endpoint_variable(env, variables) is None:
        from prefetch.flow.request import check_password_given

        check_password_given(pinned, f"the job was started with {variables[0]}={pinned}",
                             f"set {variables[0]} again in this shell and resume")
        return {**env, variables[0]: pinned}
    return env
