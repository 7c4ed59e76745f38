"""Where a dataset's files go in the Keras cache: a ``FilePlan`` per file."""

from __future__ import annotations

import os
from pathlib import Path

from prefetch.cache.layout import datasets_dir
from prefetch.model.plans import FilePlan
from prefetch.model.specs import DatasetSpec


def plan_files(spec: DatasetSpec, *, root: Path) -> list[FilePlan]:
    """Where every file of ``spec`` goes under the Keras root ``root``."""
    base = None  # (made when a relative name needs it: a URL list's targets are absolute)
    plans = []
    for f in spec.files:
        if os.path.isabs(f.target):
            final = Path(f.target)
        else:
            base = base or datasets_dir(root)
            final = base / f.target
        if f.extract:
            base = base or datasets_dir(root)
        plans.append(
            FilePlan(
                dataset=spec.name,
                spec=f,
                final=final,
                also=tuple(final.parent / a if not os.path.isabs(a) else Path(a) for a in f.also) if f.also else (),
                extract_into=tuple((base / d) for d in f.extract) if f.extract else (),
                explicit_url=spec.source == "url",
                by_link=spec.source == "url",
            )
        )
    return plans
