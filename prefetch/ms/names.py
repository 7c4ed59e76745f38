"""``ms://`` names, and where the endpoint, the token and the cache are (as modelscope finds them).

Read off modelscope 1.40.2 with its hub client ``modelscope-hub`` 0.5.1 (``config.py``,
``constants.py``, ``_download.py``):

* endpoint: ``MODELSCOPE_ENDPOINT``, else the deprecated ``MODELSCOPE_DOMAIN`` (a bare
  host gets ``https://``; ``http://`` is kept), else https://modelscope.cn;
* token: ``MODELSCOPE_API_TOKEN`` (sent as ``Authorization: Bearer`` and the
  ``m_session_id`` cookie); the client's pickled login cookie jar is not read;
* cache root: ``MODELSCOPE_CACHE``, else ``~/.cache/modelscope``; a repo's files at
  ``{models,datasets}/<owner>--<name>/snapshots/<revision name>/<path>``, the revision
  defaulting to ``master``. A non-empty folder of the pre-1.38 layout
  (``models/<owner>/<name with . as ___>``, or under ``hub/``) is what the client reads
  and writes instead, so prefetch fills that one when it exists.

prefetch adds ``get --mirror URL`` (or a mirrors.toml entry with ``ms = "URL"``) above them all.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from urllib.parse import unquote

from prefetch.errors import UsageError
from prefetch.model.specs import MS_SCHEME, named_by

SCHEME = MS_SCHEME
DEFAULT_ENDPOINT = "https://modelscope.cn"
DEFAULT_REVISION = "master"
_PART = re.compile(r"^[A-Za-z0-9_][\w.-]{0,127}$")
_KINDS = {"models": "model", "datasets": "dataset"}


@dataclass(frozen=True)
class MsRepo:
    """One ModelScope repository at one revision (a branch, tag or commit)."""

    repo_type: str  # model | dataset
    repo_id: str  # OWNER/NAME
    revision: str = DEFAULT_REVISION

    @property
    def segment(self) -> str:
        return f"{self.repo_type}s"

    @property
    def label(self) -> str:
        kind = "datasets/" if self.repo_type == "dataset" else ""
        rev = "" if self.revision == DEFAULT_REVISION else f"@{self.revision}"
        return f"{SCHEME}{kind}{self.repo_id}{rev}"


def is_ms_name(text: str) -> bool:
    return named_by(text, SCHEME)


def parse_ms_name(text: str) -> MsRepo:
    """``ms://OWNER/NAME[@REV]`` or ``ms://datasets/OWNER/NAME[@REV]``.

    Raises:
        UsageError: not a repo name, or a revision that could leave the snapshot folder.
    """
    rest, _, revision = text[len(SCHEME):].strip().partition("@")
    revision = unquote(revision) if revision else DEFAULT_REVISION
    parts = rest.strip("/").split("/")
    repo_type = "model"
    if len(parts) == 3 and parts[0] in _KINDS:
        repo_type = _KINDS[parts.pop(0)]
    if len(parts) != 2 or not all(_PART.match(p) and ".." not in p and "--" not in p for p in parts):
        raise UsageError(f"{text!r} is not a ModelScope repo name; give ms://OWNER/NAME[@REVISION] "
                         "or ms://datasets/OWNER/NAME")
    if not _PART.match(revision) or ".." in revision:
        raise UsageError(f"{text!r}: {revision!r} is not a revision name prefetch can use as a folder name")
    return MsRepo(repo_type=repo_type, repo_id="/".join(parts), revision=revision)


def _expand(value: str, env: Mapping[str, str]) -> Path:
    """As the client's ``Path.expanduser`` (``~`` and ``~user``)."""
    from prefetch.fs.paths import expand_home

    return expand_home(value, env, "MODELSCOPE_CACHE")


def ms_cache_root(env: Mapping[str, str], cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir`` (``--cache-dir``, as modelscope's ``cache_dir=``: the same layout under it),
    else ``MODELSCOPE_CACHE``, else ``~/.cache/modelscope``.

    Raises:
        UsageError: a ``~user`` that names no user.
    """
    if cache_dir:
        from prefetch.fs.paths import expand_path

        return expand_path(cache_dir, "--cache-dir")
    if env.get("MODELSCOPE_CACHE"):
        return _expand(env["MODELSCOPE_CACHE"], env)
    return _expand("~/.cache/modelscope", env)


def ms_token(env: Mapping[str, str]) -> str | None:
    """``MODELSCOPE_API_TOKEN`` (never logged, never stored by prefetch)."""
    return env.get("MODELSCOPE_API_TOKEN", "").strip() or None


def normalize_endpoint(value: str) -> str:
    value = value.strip()
    if not value.lower().startswith(("http://", "https://")):
        value = "https://" + value
    return value.rstrip("/")


def ms_endpoint(choice: str | None, *, env: Mapping[str, str], config: Path | None) -> str:
    """``--mirror`` (a URL, or a catalog name with an ``ms`` URL), else ``MODELSCOPE_ENDPOINT``,
    else ``MODELSCOPE_DOMAIN``, else https://modelscope.cn.

    Raises:
        UsageError: a bad URL, or a catalog name without a ModelScope endpoint.
    """
    from prefetch.net.urls import check_url

    if choice:
        choice = choice.strip()
        if "://" not in choice:
            from prefetch.mirrors.catalog import load_catalog

            mirror = load_catalog(config_dir=config).get(choice)
            if not mirror.ms:
                raise UsageError(f"mirror {mirror.name!r} has no ModelScope endpoint (ms = \"URL\" in mirrors.toml); "
                                 "for ms:// names give --mirror URL")
            choice = mirror.ms
        check_url(choice)
        return choice.rstrip("/")
    for var in ("MODELSCOPE_ENDPOINT", "MODELSCOPE_DOMAIN"):
        if env.get(var, "").strip():
            url = normalize_endpoint(env[var])
            check_url(url)
            return url
    return DEFAULT_ENDPOINT


def repo_dir(root: Path, repo: MsRepo) -> Path:
    """The repo's folder: the pre-1.38 one when it exists and is not empty (the client reuses
    it), else ``<root>/<type>s/<owner>--<name>``.

    Chosen exactly as the client chooses it (``_find_legacy_repo_dir``): a link to a folder
    counts, since the client reads through it. Placing then writes through it only when it is
    the user's own (``fs.safefs`` refuses another user's link in one line), never beside it
    where the client would not look."""
    owner, name = repo.repo_id.split("/")
    legacy_name = name.replace(".", "___")
    for legacy in (root / repo.segment / owner / legacy_name, root / "hub" / repo.segment / owner / legacy_name):
        try:
            if legacy.is_dir() and any(legacy.iterdir()):
                return legacy
        except OSError:
            continue
    return root / repo.segment / f"{owner}--{name}"


def snapshot_dir(root: Path, repo: MsRepo) -> Path:
    """Where the files go: ``<repo dir>/snapshots/<revision>`` (a legacy folder holds them directly)."""
    folder = repo_dir(root, repo)
    if folder.name == f"{repo.repo_id.split('/')[0]}--{repo.repo_id.split('/')[1]}":
        return folder / "snapshots" / repo.revision
    return folder
