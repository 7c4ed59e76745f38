"""A ``get`` of ``ms://`` names: ``MsPlan`` (planned without the network), then its files as ``FilePlan`` s.

A repo's file list is read from the endpoint when the plan runs; each selected file then
becomes an ordinary ``FilePlan`` (its sha256 and size from the listing, its final path
``snapshots/<revision>/<path>``), which the flow fetches like any other file: resumable
``<path>.part`` beside it, verified, renamed into place. The client reads a file at that
path as cached when its size and sha256 match, so nothing is downloaded twice. A file listed
without a sha256 is cached only while its size and revision are the listed ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Mapping, Sequence

from prefetch.errors import NetworkError
from prefetch.model.plans import FilePlan
from prefetch.model.specs import ExpectedHash, FileSpec
from prefetch.ms.api import MsFile, file_url
from prefetch.ms.names import MsRepo, ms_cache_root, ms_endpoint, parse_ms_name, snapshot_dir


@dataclass(frozen=True)
class MsPlan:
    """A repo to fetch (duck-types ``FilePlan`` where jobs and ``wait`` read one)."""

    repo: MsRepo
    root: Path  # MODELSCOPE_CACHE
    endpoint: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    # Written once every selected file is in place (prefetch's state dir, never the cache):
    # what `wait NAME` and job records look at, as a ref is for hf://.
    marker: Path | None = None
    also: tuple[Path, ...] = ()
    extract_into: tuple[Path, ...] = ()

    @property
    def label(self) -> str:
        return self.repo.label

    @property
    def dataset(self) -> str:
        return self.repo.label

    @property
    def snapshot(self) -> Path:
        return snapshot_dir(self.root, self.repo)

    @property
    def final(self) -> Path:
        return self.marker or self.snapshot

    @property
    def paths(self) -> list[Path]:
        return [self.final]


def plan_ms(names: Sequence[str], *, include: Sequence[str], exclude: Sequence[str], endpoint: str | None,
            cache: str | None, env: Mapping[str, str], config: Path | None) -> list[MsPlan]:
    """``MsPlan`` s for ``ms://`` names (no network).

    Raises:
        UsageError: a bad name, or a ``--mirror`` that is no ModelScope endpoint.
    """
    from prefetch.fs.paths import state_dir
    from prefetch.ms.records import record_path

    base = ms_endpoint(endpoint, env=env, config=config)
    root = ms_cache_root(env, cache).absolute()
    state = state_dir(env)
    return [MsPlan(repo=repo, root=root, endpoint=base, include=tuple(include), exclude=tuple(exclude),
                   marker=record_path(state, root, repo)) for repo in map(parse_ms_name, names)]


def check_path(path: str, *, label: str) -> None:
    """Refuse a listed path that could leave the snapshot folder.

    Raises:
        NetworkError: absolute, ``..``, an empty part, a backslash or NUL.
    """
    if not path or PurePosixPath(path).is_absolute() or "\\" in path or "\0" in path \
            or any(p in ("", ".", "..") for p in path.split("/")):
        raise NetworkError(f"{label}: the endpoint listed an unsafe file path {path!r}; refusing it")


def check_partial_names(chosen: Sequence[MsFile], listed: Sequence[MsFile], *, label: str) -> None:
    """Refuse a selected file whose in-flight names are files of the repo.

    prefetch downloads ``P`` into ``P.part`` with its resume state at ``P.part.json``, beside
    it in the snapshot folder; a repo that also has a file of either name (the client may
    already have placed it) would have that file overwritten or removed as a stale partial.

    Raises:
        UsageError: such a pair; ``--exclude P`` fetches the rest.
    """
    from prefetch.errors import UsageError

    names = {f.path for f in listed}
    for f in chosen:
        for other in (f"{f.path}.part", f"{f.path}.part.json"):
            if other in names:
                raise UsageError(f"{label}: the repo has both {f.path} and {other}; prefetch downloads {f.path} "
                                 f"through {f.path}.part and {f.path}.part.json, which would overwrite the repo's "
                                 f"{other}: --exclude {f.path} fetches the rest")


def file_plans(plan: MsPlan, files: Sequence[MsFile], *, listed: Sequence[MsFile] = ()) -> list[FilePlan]:
    """One ``FilePlan`` per listed file, under the repo's snapshot folder (``listed``: the repo's whole
    listing, for :func:`check_partial_names`)."""
    from prefetch.hf.cache_layout import check_tree

    check_partial_names(files, [*files, *listed], label=plan.label)
    check_tree([f.path for f in files], label=plan.label)
    snap = plan.snapshot
    out = []
    for f in files:
        check_path(f.path, label=plan.label)
        final = snap.joinpath(*f.path.split("/"))
        spec = FileSpec(name=f"{plan.repo.repo_id}/{f.path}", url=file_url(plan.endpoint, plan.repo, f.path),
                        target=str(final), expected=ExpectedHash("sha256", f.sha256) if f.sha256 else None,
                        size=f.size)
        # A file listed without a sha256 is judged by its listed size and revision: one placed at
        # another revision of the branch, or of another size, is fetched again (never kept as cached).
        out.append(FilePlan(dataset=plan.label, spec=spec, final=final, also=(), extract_into=(),
                            explicit_url=True, version=None if f.sha256 else f.revision))
    return out
