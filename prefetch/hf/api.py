"""The Hub API calls a download needs, and the token kept on the Hub's own origin.

huggingface_hub's ``snapshot_download`` asks ``/api/{type}s/{repo}/revision/{rev}`` for
the commit (``sha``), then lists ``/api/{type}s/{repo}/tree/{commit}?recursive=true``
page by page (``Link: <...>; rel="next"``). Each file entry has ``path``, ``size``,
``oid`` (the git blob sha1) and, for LFS files, ``lfs: {oid: sha256, size}``; the blob
name in the cache is the sha256 for LFS files and the git sha1 for the others (the
``X-Linked-Etag`` / ``ETag`` of ``resolve``), so the listing alone says which blobs are
already there.

The token goes only to the endpoint's origin (scheme, host, port), as huggingface_hub
does: never to the CDN a ``resolve`` redirects LFS content to (a signed URL).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urljoin, urlsplit

from prefetch.errors import NetworkError
from prefetch.hf.names import HubRepo
from prefetch.net.http import Client
from prefetch.net.jsonapi import get_json

_SHA1 = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?', re.I)
ATTEMPTS = 4


class HubAccessError(NetworkError):
    """The Hub refused the repo (401/403/404): a token, accepted terms, or the right name is needed."""


@dataclass(frozen=True)
class HubFile:
    """One file of a repo at a commit."""

    path: str
    size: int
    oid: str  # git blob sha1
    sha256: str | None = None  # LFS files
    xet_hash: str | None = None  # the listing's ``xetHash`` (files in Xet storage), kept for huggingface_hub's tree cache

    @property
    def etag(self) -> str:
        """Its blob name in the cache (what huggingface_hub names it)."""
        return self.sha256 or self.oid


def listed_size(value) -> int:
    """A file size from a hub's listing: an integer (or its digits); ValueError for anything else
    (a fraction, ``1e400`` or ``Infinity``, which JSON reads as a float ``int()`` cannot take, a bool)."""
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ValueError(value)
    return int(value)


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)


def client_factory(endpoint: str, token: str | None):
    """A ``Client`` class for the engine's ``client_factory`` that authenticates on ``endpoint`` only."""
    home = _origin(endpoint)

    class HubClient(Client):
        def request(self, url, *, headers=None, **kwargs):
            if token and _origin(url) == home:
                headers = {**(headers or {}), "Authorization": f"Bearer {token}"}
            return super().request(url, headers=headers, **kwargs)

    return HubClient


def resolve_url(endpoint: str, repo: HubRepo, commit: str, path: str) -> str:
    """``{endpoint}/[datasets/]ORG/NAME/resolve/{commit}/{path}`` (``hf_hub_url``)."""
    return f"{endpoint}/{repo.url_path}/resolve/{quote(commit, safe='')}/{quote(path)}"


def repo_commit(client: Client, endpoint: str, repo: HubRepo, *, token: bool, backoff: tuple[float, float] = (0.5, 8.0)) -> str:
    """The commit hash ``repo.revision`` points at (a commit hash is its own answer).

    Raises:
        HubAccessError: 401/403/404 (the message says what to do).
        NetworkError: the Hub could not be reached, or answered nonsense.
    """
    if repo.is_commit:
        return repo.revision
    url = f"{endpoint}/api/{repo.repo_type}s/{repo.repo_id}/revision/{quote(repo.revision, safe='')}"
    data, _ = _get_json(client, url, repo, token=token, backoff=backoff)
    sha = data.get("sha") if isinstance(data, dict) else None
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise NetworkError(f"{repo.label}: {url} gave no commit hash ('sha'); is {endpoint} a Hugging Face endpoint?")
    return sha


MAX_LISTED_FILES = 1_000_000  # entries of one repo's listing (folders too); PREFETCH_HUB_MAX_FILES overrides


def max_listed_files(env) -> int:
    """``PREFETCH_HUB_MAX_FILES`` (a positive whole number), else ``MAX_LISTED_FILES``."""
    try:
        value = int(env.get("PREFETCH_HUB_MAX_FILES", MAX_LISTED_FILES))
    except ValueError:
        return MAX_LISTED_FILES
    return value if value > 0 else MAX_LISTED_FILES


def list_files(client: Client, endpoint: str, repo: HubRepo, commit: str, *, token: bool,
               backoff: tuple[float, float] = (0.5, 8.0), max_files: int = MAX_LISTED_FILES) -> list[HubFile]:
    """Every file of ``repo`` at ``commit`` (the recursive tree, all pages).

    Raises:
        HubAccessError, NetworkError: as :func:`repo_commit`; NetworkError too past ``max_files``
        entries (a listing whose pages keep naming new files would otherwise never end).
    """
    url: str | None = f"{endpoint}/api/{repo.repo_type}s/{repo.repo_id}/tree/{commit}?recursive=true&expand=false"
    files: list[HubFile] = []
    pages: set[str] = set()
    listed: set = set()  # every entry's path so far (folders too)
    while url:
        if url in pages:  # (a broken or hostile endpoint: its list would grow for ever)
            raise NetworkError(f"{repo.label}: {endpoint} lists the files in a loop (it sends {url} again as the "
                               f"next page); is it a Hugging Face endpoint?")
        pages.add(url)
        page, link = _get_json(client, url, repo, token=token, backoff=backoff)
        if not isinstance(page, list):
            raise NetworkError(f"{repo.label}: {url} did not answer a file list")
        paths = {str(entry.get("path")) if isinstance(entry, dict) else repr(entry) for entry in page}
        if _NEXT.search(link or "") and (not page or paths <= listed):  # (a next page each time, a new
            # cursor in it, and nothing new: the same files again, or none; the listing would never end)
            raise NetworkError(f"{repo.label}: {endpoint} sent a page of the file list with no file not already "
                               f"listed, and a next page after it; the listing would never end")
        listed |= paths
        if len(listed) > max_files:
            raise NetworkError(f"{repo.label}: {endpoint} lists more than {max_files:,} files for one repo (a "
                               f"listing that may never end); PREFETCH_HUB_MAX_FILES=N allows more")
        for entry in page:
            try:
                if entry.get("type") != "file":
                    continue
                lfs = entry.get("lfs") or None
                xet = entry.get("xetHash")
                f = HubFile(path=str(entry["path"]), size=listed_size(entry["size"]), oid=str(entry["oid"]).lower(),
                            sha256=str(lfs["oid"]).lower() if lfs else None,
                            xet_hash=xet.lower() if isinstance(xet, str) and _SHA256.fullmatch(xet.lower()) else None)
                # Blob names become file names: only hashes, never paths.
                if not _SHA1.fullmatch(f.oid) or (f.sha256 is not None and not _SHA256.fullmatch(f.sha256)) \
                        or f.size < 0:
                    raise ValueError(entry)
                files.append(f)
            except (AttributeError, KeyError, TypeError, ValueError):
                raise NetworkError(f"{repo.label}: {url} answered a malformed file entry: {entry!r:.200}") from None
        match = _NEXT.search(link or "")
        if match:  # the Hub names the next page: held to what a redirect may be (http(s), never down to http)
            from prefetch.net.checks import check_redirect

            following = urljoin(url, match.group(1))
            try:
                check_redirect(url, following)
            except NetworkError as exc:
                raise NetworkError(f"{repo.label}: the file list's next page: {exc}") from None
        url = following if match else None
    return files


def _get_json(client: Client, url: str, repo: HubRepo, *, token: bool, backoff: tuple[float, float]):
    """(parsed JSON, Link header) of a GET, retrying connection trouble and 5xx a few times."""
    def refuse(status: int, final: str, headers) -> HubAccessError | None:
        if status not in (401, 403, 404):
            return None
        return _access_error(repo, status, headers.get("X-Error-Code"), url=final, token=token)

    return get_json(client, url, label=repo.label, api="Hugging Face", refuse=refuse, backoff=backoff,
                    attempts=ATTEMPTS)


def _access_error(repo: HubRepo, status: int, code: str | None, *, url: str, token: bool) -> HubAccessError:
    host = urlsplit(url).netloc
    if status == 404 and code not in ("GatedRepo",):
        what = "revision" if code == "RevisionNotFound" else "repo"
        return HubAccessError(f"{repo.label}: {host} answered 404: no such {what}; check the name and the revision")
    if not token:
        return HubAccessError(
            f"{repo.label}: {host} answered {status}: this repo is gated or private, so a token is needed:"
            " set HF_TOKEN (or run `hf auth login`), and accept the repo's terms on its page"
        )
    if status == 401:
        return HubAccessError(f"{repo.label}: {host} answered 401: the token was refused (expired or wrong?);"
                              " set a valid HF_TOKEN")
    return HubAccessError(f"{repo.label}: {host} answered 403: the token has no access to this gated repo;"
                          " accept its terms on the repo's page, or use a token with read access")
