"""``hf://`` names, and where the Hub, the token and the cache are (as huggingface_hub finds them).

huggingface_hub (``constants.py``, ``utils/_auth.py``) reads:

* cache root: ``HF_HUB_CACHE``, else the legacy ``HUGGINGFACE_HUB_CACHE``, else
  ``HF_HOME/hub``; ``HF_HOME`` defaults to ``$XDG_CACHE_HOME/huggingface`` (else
  ``~/.cache/huggingface``);
* token: ``HF_TOKEN`` (legacy ``HUGGING_FACE_HUB_TOKEN``), else the file
  ``HF_TOKEN_PATH`` (default ``HF_HOME/token``, written by ``hf auth login``);
* endpoint: ``HF_ENDPOINT``, else https://huggingface.co.

prefetch adds, between the last two: what ``prefetch mirror use NAME --tool hf``
persisted for new kernels; and above all of them ``get --mirror NAME|URL``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from urllib.parse import unquote

from prefetch.errors import UsageError
from prefetch.model.specs import HF_SCHEME, named_by

SCHEME = HF_SCHEME
DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_REVISION = "main"
_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}
# huggingface_hub's validate_repo_id: word characters, '-' and '.', at most 96 per part.
_PART = re.compile(r"^[A-Za-z0-9_][\w.-]{0,95}$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class HubRepo:
    """One Hub repository at one revision."""

    repo_type: str  # model | dataset | space
    repo_id: str  # ORG/NAME
    revision: str = DEFAULT_REVISION

    @property
    def folder(self) -> str:
        """The repo's folder in the cache: ``models--ORG--NAME`` (``repo_folder_name``)."""
        return "--".join([f"{self.repo_type}s", *self.repo_id.split("/")])

    @property
    def url_path(self) -> str:
        """``ORG/NAME``, ``datasets/ORG/NAME`` or ``spaces/ORG/NAME`` (resolve URLs)."""
        return _URL_PREFIX[self.repo_type] + self.repo_id

    @property
    def label(self) -> str:
        """The canonical name: ``hf://[datasets/]ORG/NAME[@REVISION]``."""
        rev = "" if self.revision == DEFAULT_REVISION else f"@{self.revision}"
        return f"{SCHEME}{self.url_path}{rev}"

    @property
    def is_commit(self) -> bool:
        return bool(_COMMIT.match(self.revision))


def is_hub_name(text: str) -> bool:
    """True for ``hf://...`` names."""
    return named_by(text, SCHEME)


def parse_hub_name(text: str) -> HubRepo:
    """``hf://ORG/NAME[@REV]``, ``hf://datasets/ORG/NAME[@REV]``, ``hf://spaces/...``.

    Raises:
        UsageError: not a valid repo name or revision.
    """
    rest = text[len(SCHEME):].strip()
    rest, _, revision = rest.partition("@")
    revision = unquote(revision) if revision else DEFAULT_REVISION
    parts = [p for p in rest.strip("/").split("/")]
    repo_type = "model"
    if parts and parts[0] in _TYPES and len(parts) > 1:
        repo_type = _TYPES[parts.pop(0)]
    example = "hf://ORG/NAME[@REVISION] or hf://datasets/ORG/NAME"
    if not 1 <= len(parts) <= 2 or not all(_PART.match(p) and "--" not in p and ".." not in p for p in parts):
        raise UsageError(f"{text!r} is not a Hugging Face repo name; give {example}")
    rev_parts = revision.split("/")
    if any(p in ("", ".", "..") for p in rev_parts) or any(c in revision for c in "\\\0"):
        raise UsageError(f"{text!r}: {revision!r} is not a valid revision (a branch, tag or commit hash)")
    return HubRepo(repo_type=repo_type, repo_id="/".join(parts), revision=revision)


def _expand(value: str, env: Mapping[str, str], what: str) -> Path:
    """As huggingface_hub's ``constants``: ``expanduser`` (``~`` and ``~user``), then ``expandvars``."""
    from prefetch.fs.paths import expand_home

    return Path(os.path.expandvars(str(expand_home(value, env, what))))


def hf_home(env: Mapping[str, str]) -> Path:
    """``HF_HOME``, else ``$XDG_CACHE_HOME/huggingface``, else ``~/.cache/huggingface``.

    A variable set but empty is used as huggingface_hub uses it (``os.getenv`` with a
    default): ``HF_HOME=`` is the current directory, so the cache is ``./hub``.
    """
    if "HF_HOME" in env:
        return _expand(env["HF_HOME"], env, "HF_HOME")
    base = env["XDG_CACHE_HOME"] if "XDG_CACHE_HOME" in env else "~/.cache"
    return _expand(base, env, "XDG_CACHE_HOME") / "huggingface"


def hub_cache_root(env: Mapping[str, str] | None = None, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where huggingface_hub keeps repos: ``cache_dir`` (``--cache-dir``, as huggingface_hub's
    ``cache_dir=``), else ``HF_HUB_CACHE``, ``HUGGINGFACE_HUB_CACHE``, ``HF_HOME/hub`` (each used
    when set, even empty: the current directory, as huggingface_hub reads it).

    Raises:
        UsageError: a ``~user`` that names no user.
    """
    if cache_dir:
        from prefetch.fs.paths import expand_path

        return expand_path(cache_dir, "--cache-dir")
    env = os.environ if env is None else env
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if var in env:
            return _expand(env[var], env, var)
    return hf_home(env) / "hub"


def hub_token(env: Mapping[str, str] | None = None) -> str | None:
    """The token huggingface_hub would send (never logged, never stored by prefetch)."""
    env = os.environ if env is None else env
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if env.get(var, "").strip():
            return env[var].strip()
    try:
        path = _expand(env["HF_TOKEN_PATH"], env, "HF_TOKEN_PATH") if "HF_TOKEN_PATH" in env else (
            hf_home(env) / "token")
    except UsageError:  # ~user naming no user: huggingface_hub finds no file there either
        return None
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def schemeless_endpoint(endpoint: str) -> str:
    """What is wrong with an ``HF_ENDPOINT`` without ``https://`` (huggingface_hub's requests refuse it too)."""
    return (f"HF_ENDPOINT={endpoint} is not a URL (no https://); huggingface_hub cannot use it either: "
            f"set HF_ENDPOINT=https://{endpoint.lstrip('/')}")


def hub_endpoint(choice: str | None, *, env: Mapping[str, str], config: Path | None) -> str:
    """The Hub to ask: ``--mirror`` (a URL or a catalog name with an ``hf`` URL), else
    ``HF_ENDPOINT``, else what ``mirror use --tool hf`` persisted, else huggingface.co.

    Raises:
        UsageError: a bad URL, or a catalog name without a Hugging Face endpoint.
    """
    if choice:
        choice = choice.strip()
        if "://" not in choice:
            from prefetch.mirrors.catalog import load_catalog

            mirror = load_catalog(config_dir=config).get(choice)
            if not mirror.hf:
                raise UsageError(
                    f"mirror {mirror.name!r} has no Hugging Face endpoint; for hf:// names give"
                    " --mirror hf-mirror, --mirror huggingface or an endpoint URL"
                )
            choice = mirror.hf
        from prefetch.net.urls import check_url

        check_url(choice)
        return choice.rstrip("/")
    if env.get("HF_ENDPOINT", "").strip():
        endpoint = env["HF_ENDPOINT"].strip()
        if not endpoint.lower().startswith(("http://", "https://")):
            raise UsageError(schemeless_endpoint(endpoint))
        return endpoint.rstrip("/")
    from prefetch.mirrors.configs.hf import read_hf_effective

    persisted = read_hf_effective(env=env).persisted
    return (persisted or DEFAULT_ENDPOINT).rstrip("/")
