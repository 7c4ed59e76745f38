"""Registry datasets (``cifar10``, ``mnist``, a user registry's names) into the Keras cache."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from prefetch.cache.layout import datasets_dir, keras_root
from prefetch.cache.plans import plan_files
from prefetch.flow.planners.base import PlanContext, Planner
from prefetch.model.plans import FilePlan


def add_tf_keras_names(plan: FilePlan, *, env: Mapping[str, str], root: Path) -> FilePlan:
    """Also place ``plan`` where tf-keras looks, when tf-keras is installed and not reading ``root``.

    tf-keras (Keras 2) ignores KERAS_HOME and always uses ~/.keras; with KERAS_HOME
    set, its legacy names (the target, and extraction into datasets/ itself) are
    added there as hard links (or copies) and a second extraction.
    """
    if os.path.isabs(plan.spec.target):
        return plan
    tf_root = keras_root(env={k: v for k, v in env.items() if k != "KERAS_HOME"})
    if tf_root.absolute() == root.absolute():
        return plan
    from prefetch.cache.keras import detect_keras  # the installed Keras: only a dataset under KERAS_HOME asks

    if not detect_keras().tf_keras:
        return plan
    base = datasets_dir(tf_root)
    legacy_dirs = tuple(base / d for d in plan.spec.extract if d in (".", ""))
    return dataclasses.replace(
        plan,
        also=(*plan.also, base / plan.spec.target),
        extract_into=(*plan.extract_into, *legacy_dirs),
    )


def tf_keras_plans(plans: list[FilePlan], *, env: Mapping[str, str], root: Path) -> list[FilePlan]:
    """``plans`` with tf-keras's names added when the root came from KERAS_HOME (``get`` and ``rm`` alike)."""
    if "KERAS_HOME" in env and root.absolute() == keras_root(env=env).absolute():
        # The root came from KERAS_HOME (directly, or fixed into a background job); tf-keras reads ~/.keras.
        return [add_tf_keras_names(plan, env=env, root=root) for plan in plans]
    return plans


class DatasetPlanner(Planner):
    """Any name that no other kind claims is a dataset name, looked up in the registries."""

    kind = "dataset"

    def claims(self, name: str) -> bool:
        return True  # the fallback: registered last

    def plan(self, names: Sequence[str], ctx: PlanContext) -> list[FilePlan]:
        if not names:
            return []
        from prefetch.cache.registry import load_registry  # tomllib and the tables: only for dataset names

        request = ctx.request
        registry = load_registry(extra_files=[Path(r) for r in request.registries], config_dir=ctx.config)
        plans = [plan for name in names for plan in plan_files(registry.get(name), root=ctx.root)]
        return [with_shared_copies(p, ctx.env) for p in tf_keras_plans(plans, env=ctx.env, root=ctx.root)]


def with_shared_copies(plan: FilePlan, env: Mapping[str, str]) -> FilePlan:
    """``plan`` with the places prefetch put the same file for another cache (torchvision's
    CIFAR-10 under a ``--root``): linked from there when it matches, not downloaded again."""
    from prefetch.cache.copies import known_copies
    from prefetch.errors import PrefetchError
    from prefetch.fs.paths import state_dir

    try:
        found = known_copies(state_dir(env), f"{plan.dataset}/{plan.spec.name}")
    except PrefetchError:
        return plan
    found = [p for p in found if p not in plan.paths]
    return dataclasses.replace(plan, copies=(*plan.copies, *found)) if found else plan


PLANNER = DatasetPlanner()
