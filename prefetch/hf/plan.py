"""A ``get`` of ``hf://`` names, planned without touching the network.

``HubPlan`` stands where a ``FilePlan`` stands for a dataset file: jobs record its
``label``/``dataset``/``final`` and ``wait NAME`` checks its ``paths``; ``final`` is
the repo's ref (written last) so that "in place" means complete.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from prefetch.hf import cache_layout
from prefetch.hf.names import HubRepo


@dataclass(frozen=True)
class HubPlan:
    """A repo to fetch (duck-types ``FilePlan`` where jobs and ``wait`` read one)."""

    repo: HubRepo
    root: Path  # the Hugging Face hub cache
    endpoint: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    manifest: Path | None = None  # prefetch's record that this selection is complete (``hf/complete.py``)
    # More sources for LFS files, found when the repo runs: ``copies(files, on_event, label=, timeouts=)``
    # -> {sha256: (url, ...)} (``--lfs-from``: ``prefetch/ms/alternate.py``). Blobs stay checked by the
    # Hub's sha256; a mixed download that does not match is fetched again from the Hub alone.
    copies: Callable | None = None

    @property
    def label(self) -> str:
        return self.repo.label

    @property
    def dataset(self) -> str:
        return self.repo.label

    @property
    def repo_dir(self) -> Path:
        return self.root / self.repo.folder

    @property
    def final(self) -> Path:
        """What exists once the repo is complete: its ref (written last), or for a commit prefetch's
        manifest (a snapshot folder may exist half-filled), else the snapshot."""
        if self.repo.is_commit:
            if self.manifest is not None:
                return self.manifest
            return cache_layout.snapshot_dir(self.repo_dir, self.repo.revision)
        return cache_layout.ref_path(self.repo_dir, self.repo.revision)

    @property
    def paths(self) -> list[Path]:
        return [self.final]

    also: tuple[Path, ...] = ()
    extract_into: tuple[Path, ...] = ()


def select_files(files: Sequence, *, include: Sequence[str], exclude: Sequence[str]) -> list:
    """``--include``/``--exclude`` globs as huggingface_hub's ``allow_patterns``/``ignore_patterns``.

    fnmatch on the whole path (``*`` crosses ``/``); a pattern ending in ``/`` means
    everything under that folder.
    """
    def norm(patterns: Sequence[str]) -> list[str]:
        return [p + "*" if p.endswith("/") else p for p in patterns]

    inc, exc = norm(include), norm(exclude)
    return [f for f in files
            if (not inc or any(fnmatch.fnmatch(f.path, p) for p in inc))
            and not any(fnmatch.fnmatch(f.path, p) for p in exc)]


def plan_hub(names: Sequence[str], *, include: Sequence[str], exclude: Sequence[str], endpoint: str | None,
             cache: str | None, env: Mapping[str, str], config: Path | None) -> list[HubPlan]:
    """``HubPlan``s for ``hf://`` names (no network).

    Raises:
        UsageError: a bad name, or a ``--mirror`` that is no Hugging Face endpoint.
    """
    from prefetch.hf.names import hub_cache_root, hub_endpoint, parse_hub_name

    base = hub_endpoint(endpoint, env=env, config=config)
    from prefetch.fs.paths import state_dir

    root = hub_cache_root(env, cache)
    from prefetch.hf.complete import manifest_path

    state = state_dir(env)
    plans = []
    for name in names:
        repo = parse_hub_name(name)
        plans.append(HubPlan(repo=repo, root=root.absolute(), endpoint=base, include=tuple(include),
                             exclude=tuple(exclude),
                             manifest=manifest_path(state, root.absolute() / repo.folder, repo.revision,
                                                    include, exclude)))
    return plans

