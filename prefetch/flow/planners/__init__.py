"""One planner per kind of name, behind one small interface (``base.Planner``).

A name is claimed by the first planner in ``PLANNERS`` whose ``claims(name)`` is
true; the dataset planner comes last and takes every name no other kind claims.
Adding a kind of name (``torchvision:``, ``ms://``, ``nltk:``) means adding its module
here and one line below: nothing else in the flow changes.

May import: what ``flow`` may import. Planners know their own kind only.
"""

from __future__ import annotations

from collections.abc import Sequence

from prefetch.flow.planners import datasets, hub, modelscope, nltk, torchvision, urls
from prefetch.flow.planners.base import Planner

PLANNERS: tuple[Planner, ...] = (
    hub.PLANNER,
    torchvision.PLANNER,
    modelscope.PLANNER,
    nltk.PLANNER,
    urls.PLANNER,
    datasets.PLANNER,  # the fallback: registered last
)


def planner_for(name: str) -> Planner:
    """The planner that claims ``name`` (the dataset planner when no other does)."""
    return next(p for p in PLANNERS if p.claims(name))


def group_names(names: Sequence[str]) -> dict[Planner, list[str]]:
    """Names by the planner that claims them, kinds in order of first appearance, names in order."""
    groups: dict[Planner, list[str]] = {}
    for name in names:
        groups.setdefault(planner_for(name), []).append(name)
    return groups
