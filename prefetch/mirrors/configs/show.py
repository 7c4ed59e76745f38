"""``mirror show``: what pip, uv, conda and Hugging Face clients will really use."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from prefetch.mirrors.configs.conda import CondaEffective, read_conda_effective
from prefetch.mirrors.configs.hf import HfEffective, read_hf_effective
from prefetch.mirrors.configs.pip import PipEffective
from prefetch.mirrors.configs.pip_asked import read_pip_effective
from prefetch.mirrors.configs.uv import UvEffective, read_uv_effective
from prefetch.mirrors.catalog import MirrorCatalog

# Every PIP_* and UV_* variable is a setting of that tool (PIP_NO_INDEX, PIP_FIND_LINKS,
# UV_OFFLINE, ... bear on downloads too), plus these.
OVERRIDE_PREFIXES = ("PIP_", "UV_")
OVERRIDE_VARS = (
    "CONDARC",
    "HF_ENDPOINT",
    "KERAS_HOME",
    "PREFETCH_DATASET_MIRROR",
    "PREFETCH_HOME",
)


@dataclass(frozen=True)
class ToolState:
    """One tool's effective mirror."""

    tool: str
    url: str | None
    source: str
    mirror: str | None  # catalog name when the URL is a known mirror
    detail: str = ""


@dataclass(frozen=True)
class EffectiveMirrors:
    """Every tool's effective mirror and the environment variables that bear on them."""

    tools: tuple[ToolState, ...]
    env_overrides: dict[str, str]
    pip: PipEffective
    uv: UvEffective
    conda: CondaEffective
    hf: HfEffective


def name_for_url(catalog: MirrorCatalog | None, url: str | None, *, kind: str) -> str | None:
    """The catalog name whose ``kind`` URL equals ``url`` (ignoring a trailing '/')."""
    if not url or catalog is None:
        return None
    wanted = url.rstrip("/").lower()
    for mirror in catalog.mirrors.values():
        value = getattr(mirror, kind)
        if value and value.rstrip("/").lower() == wanted:
            return mirror.name
    return None


def read_effective_mirrors(
    *,
    catalog: MirrorCatalog | None,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    cwd: Path | None = None,
) -> EffectiveMirrors:
    """Ask pip itself, and read uv/conda/HF settings the way those tools do."""
    env = os.environ if env is None else env
    pip = read_pip_effective(python=python or sys.executable, env=env)
    uv = read_uv_effective(env=env, cwd=cwd)
    conda = read_conda_effective(env=env)
    hf = read_hf_effective(env=env)
    if pip.error:
        pip_state = ToolState("pip", None, pip.error, None)
    else:
        extra = f"extra-index-url: {' '.join(pip.extra_index_urls)}" if pip.extra_index_urls else ""
        pip_state = ToolState("pip", pip.index_url, pip.source, name_for_url(catalog, pip.index_url, kind="pypi"), extra)
    hf_url = hf.current or hf.persisted
    hf_detail = ""
    if hf.persisted and hf.current != hf.persisted:
        hf_detail = f"new kernels get {hf.persisted}; this one has {hf.current or 'none'}"
    tools = (
        pip_state,
        ToolState("uv", uv.index_url, uv.source, name_for_url(catalog, uv.index_url, kind="pypi"))
        if not uv.broken_config else ToolState("uv", None, uv.source, None),
        ToolState("conda", conda.base, conda.source, name_for_url(catalog, conda.base, kind="conda")),
        ToolState(
            "hf",
            hf_url or "https://huggingface.co",
            "HF_ENDPOINT" if hf.current else hf.source,
            name_for_url(catalog, hf_url or "https://huggingface.co", kind="hf"),
            hf_detail,
        ),
    )
    overrides = {
        name: value
        for name, value in sorted(env.items())
        if value and (name.startswith(OVERRIDE_PREFIXES) or name in OVERRIDE_VARS)
    }
    return EffectiveMirrors(tools=tools, env_overrides=overrides, pip=pip, uv=uv, conda=conda, hf=hf)
