"""The ModelScope API calls a download needs: the file list of a repo, and each file's URL.

modelscope-hub 0.5.1 (``_legacy_api.py``) lists model files with ``GET /api/v1/models/
OWNER/NAME/repo/files?Revision=&Recursive=True`` (one answer, truncated by the server at
3000 entries: then it lists folder by folder with ``Root=``) and dataset files with
``GET /api/v1/datasets/OWNER/NAME/repo/tree?Revision=&Recursive=True&PageNumber=&PageSize=``
(a short page is the last). Answers are ``{"Code", "Data": {"Files": [...]}, "Success"}``;
an entry has ``Path``, ``Type`` (``blob`` or ``tree``), ``Size`` and ``Sha256``. File
bytes come from ``/api/v1/{type}s/OWNER/NAME/repo?Revision=&FilePath=``; large files
redirect to object storage (the token stays on the endpoint's origin).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote_plus, urlencode, urlsplit

from prefetch.errors import NetworkError
from prefetch.hf.api import MAX_LISTED_FILES, HubAccessError, _origin, listed_size
from prefetch.hf.cache_layout import listed_twice
from prefetch.ms.names import MsRepo
from prefetch.net.http import Client
from prefetch.net.jsonapi import get_json

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
PAGE_SIZE = 200
TRUNCATION_LIMIT = 3000  # repo/files answers at most this many entries
# The largest listing answer read (a hub answer may otherwise be 64 MiB): 3000 entries with a
# sha256 each are ~0.6 MiB, 5.5 KiB an entry fits. Parsed, 16 MiB of the tiniest entries
# ({"Path":"N","Size":1}, ~625,000) took ~110 MB more peak RSS; 64 MiB of them ~420 MB (measured).
MAX_ANSWER = 16 << 20
MAX_REVISION = 256  # a listed revision's characters (a commit id is 40; kept in a file's completion record)


@dataclass(frozen=True)
class MsFile:
    path: str
    size: int
    sha256: str | None
    revision: str | None = None  # the entry's ``Revision``: what judges a file listed without a sha256


def client_factory(endpoint: str, token: str | None):
    """A ``Client`` class that sends the token (as the client does: Bearer and the ``m_session_id``
    cookie) to ``endpoint``'s origin only, never to the object storage large files redirect to."""
    home = _origin(endpoint)

    class MsClient(Client):
        def request(self, url, *, headers=None, **kwargs):
            if token and _origin(url) == home:
                headers = {**(headers or {}), "Authorization": f"Bearer {token}", "Cookie": f"m_session_id={token}"}
            return super().request(url, headers=headers, **kwargs)

    return MsClient


def file_url(endpoint: str, repo: MsRepo, path: str) -> str:
    """``{endpoint}/api/v1/{type}s/OWNER/NAME/repo?Revision=&FilePath=`` (as the client builds it)."""
    return (f"{endpoint}/api/v1/{repo.segment}/{repo.repo_id}/repo"
            f"?Revision={quote_plus(repo.revision)}&FilePath={quote_plus(path)}")


def list_files(client: Client, endpoint: str, repo: MsRepo, *, token: bool,
               backoff: tuple[float, float] = (0.5, 8.0), max_files: int = MAX_LISTED_FILES) -> list[MsFile]:
    """Every file of ``repo`` at its revision.

    Raises:
        HubAccessError: 401/403/404 (the message says what to do).
        NetworkError: unreachable, or an answer that is not a ModelScope listing, or that lists a
        path twice (as ``hf://`` listings are refused); a listing (a
        dataset's pages, a model's folder walk) of more than ``max_files`` entries, folders
        included (``PREFETCH_HUB_MAX_FILES``); an answer over ``MAX_ANSWER`` bytes; a walk's
        cut answers holding more than real ones can (see ``_walk``).
    """
    base = f"{endpoint}/api/v1/{repo.segment}/{repo.repo_id}"
    entries: list = []
    if repo.repo_type == "dataset":
        page = 1
        listed: set[str] = set()
        while True:
            query = {"Revision": repo.revision, "Recursive": "True", "PageNumber": page, "PageSize": PAGE_SIZE}
            got = _files(client, f"{base}/repo/tree?{urlencode(query)}", repo, token, backoff)
            paths = _paths(got)
            if got and paths <= listed:  # (a server that ignores PageNumber: the listing would never end)
                raise NetworkError(f"{repo.label}: {endpoint} sent page {page} of the file list with only files "
                                   f"already listed (does it ignore PageNumber?); the listing would never end")
            _count(listed, paths, max_files, repo, endpoint)
            entries += got
            if len(got) < PAGE_SIZE:
                break
            page += 1
    else:
        entries = _walk(client, base, repo, token, backoff, root=None, kept=[0], max_files=max_files)
    files: dict[str, MsFile] = {}
    for entry in entries:
        try:
            if (entry.get("Type") or "blob") == "tree":
                continue
            path = str(entry["Path"])
            sha = (entry.get("Sha256") or "").lower() or None
            revision = entry.get("Revision")  # (anything but a short string: none, judged by the size alone)
            revision = revision if isinstance(revision, str) and 0 < len(revision) <= MAX_REVISION else None
            f = MsFile(path=path, size=listed_size(entry["Size"]), sha256=sha, revision=revision)
            if f.size < 0 or (sha is not None and not _SHA256.match(sha)):
                raise ValueError(entry)
        except (AttributeError, KeyError, TypeError, ValueError):
            raise NetworkError(f"{repo.label}: {endpoint} listed a malformed file entry: {entry!r:.200}") from None
        if f.path in files:  # (which of two would land would be the endpoint's order: neither does)
            raise listed_twice(f.path, label=repo.label)
        files[f.path] = f
    return list(files.values())


FOLDER_DEPTH = 64  # folders inside folders a listing may go down (a path of more is not a repo's)
# Listings cut at TRUNCATION_LIMIT a walk may meet (each holds that many entries or more: 256 is
# 768,000 files and up); a server cutting every folder's listing, each folder holding two, would
# otherwise be walked 2 ** FOLDER_DEPTH times.
MAX_CUT_LISTINGS = 256


def _walk(client, base: str, repo: MsRepo, token: bool, backoff, *, root: str | None, kept: list[int],
          max_files: int, depth: int = 0, cut: list[int] | None = None) -> list:
    """``repo/files``; a listing cut at the server's limit is listed again folder by folder (only
    folders inside the one listed, at most ``FOLDER_DEPTH`` deep and ``MAX_CUT_LISTINGS`` cut
    listings in all: a server that ignores ``Root`` or invents folders without end is a network
    error, not an endless walk). ``cut``: the cut listings met so far and the entries they held
    (one count for the walk; the entries at most ``MAX_CUT_LISTINGS * TRUNCATION_LIMIT``, what
    real cut listings hold: answers far over the cut, again and again, took a minute to read);
    ``kept``: the entries (folders too) of the answers the walk keeps, all but the cut ones:
    at most ``max_files`` (a cut listing naming thousands of folders that each list thousands
    of files would otherwise be walked to the end). A real repo's path is in one kept answer
    only, so this counts its files and folders, as ``hf://`` listings are counted."""
    if depth > FOLDER_DEPTH:
        raise NetworkError(f"{repo.label}: the file list goes more than {FOLDER_DEPTH} folders deep ({root!r:.200}); "
                           f"is {urlsplit(base).netloc} a ModelScope endpoint?")
    cut = [0, 0] if cut is None else cut
    query = {"Revision": repo.revision, "Recursive": "True", **({"Root": root} if root else {})}
    entries = _files(client, f"{base}/repo/files?{urlencode(query)}", repo, token, backoff)
    if len(entries) < TRUNCATION_LIMIT:
        _tally(kept, len(entries), max_files, repo, base)
        return entries
    cut[0] += 1
    cut[1] += len(entries)
    del entries  # (not held while the folders below are walked: 64 levels of big cut answers took 8.5 GB)
    if cut[0] > MAX_CUT_LISTINGS:
        raise NetworkError(f"{repo.label}: the file list was cut at {TRUNCATION_LIMIT} entries in more than "
                           f"{MAX_CUT_LISTINGS} folders (more than {MAX_CUT_LISTINGS * TRUNCATION_LIMIT:,} files); "
                           f"is {urlsplit(base).netloc} a ModelScope endpoint?")
    if cut[1] > MAX_CUT_LISTINGS * TRUNCATION_LIMIT:  # (real ones are cut at 3000 each)
        raise NetworkError(f"{repo.label}: {urlsplit(base).netloc} answered more than "
                           f"{MAX_CUT_LISTINGS * TRUNCATION_LIMIT:,} entries in listings that are cut at "
                           f"{TRUNCATION_LIMIT}; is it a ModelScope endpoint?")
    query["Recursive"] = "False"
    top = _files(client, f"{base}/repo/files?{urlencode(query)}", repo, token, backoff)
    _tally(kept, len(top), max_files, repo, base)
    out = [e for e in top if isinstance(e, dict) and e.get("Type") != "tree"]
    for entry in top:
        if isinstance(entry, dict) and entry.get("Type") == "tree" and entry.get("Path"):
            path = str(entry["Path"])
            if root is not None and not path.strip("/").startswith(root.strip("/") + "/"):
                raise NetworkError(f"{repo.label}: listing folder {root!r:.100} answered folder {path!r:.100}, "
                                   f"which is not inside it; is {urlsplit(base).netloc} a ModelScope endpoint?")
            out += _walk(client, base, repo, token, backoff, root=path, kept=kept, max_files=max_files,
                         depth=depth + 1, cut=cut)
    return out


def _paths(entries: list) -> set[str]:
    return {str(e.get("Path")) if isinstance(e, dict) else repr(e) for e in entries}


def _count(listed: set[str], paths: set[str], max_files: int, repo: MsRepo, endpoint: str) -> None:
    """Add ``paths`` to ``listed``.

    Raises:
        NetworkError: more than ``max_files`` paths listed in all.
    """
    listed |= paths
    _over(len(listed), max_files, repo, endpoint)


def _tally(kept: list[int], more: int, max_files: int, repo: MsRepo, endpoint: str) -> None:
    """Add ``more`` entries to the count ``kept[0]``.

    Raises:
        NetworkError: more than ``max_files`` in all.
    """
    kept[0] += more
    _over(kept[0], max_files, repo, endpoint)


def _over(count: int, max_files: int, repo: MsRepo, endpoint: str) -> None:
    if count > max_files:
        host = urlsplit(endpoint).netloc or endpoint
        raise NetworkError(f"{repo.label}: {host} lists more than {max_files:,} files for one repo (a "
                           f"listing that may never end); PREFETCH_HUB_MAX_FILES=N allows more")


def _files(client: Client, url: str, repo: MsRepo, token: bool, backoff: tuple[float, float]) -> list:
    data = _get_json(client, url, repo, token, backoff)
    if isinstance(data, dict) and (data.get("Success") is False or data.get("Code") not in (200, "200", None)):
        raise NetworkError(f"{repo.label}: {urlsplit(url).netloc} refused the listing: {data.get('Message')!r:.200}")
    payload = data.get("Data") if isinstance(data, dict) else None
    if isinstance(payload, dict):
        payload = payload.get("Files") or payload.get("files") or []
    if not isinstance(payload, list):
        raise NetworkError(f"{repo.label}: {url} did not answer a ModelScope file list")
    return payload


def _get_json(client: Client, url: str, repo: MsRepo, token: bool, backoff: tuple[float, float]):
    def refuse(status: int, final: str, headers) -> HubAccessError | None:
        return _access_error(repo, status, urlsplit(final).netloc, token=token) if status in (401, 403, 404) else None

    return get_json(client, url, label=repo.label, api="ModelScope", refuse=refuse, backoff=backoff,
                    max_body=MAX_ANSWER)[0]


def _access_error(repo: MsRepo, status: int, host: str, *, token: bool) -> HubAccessError:
    if status == 404:
        return HubAccessError(f"{repo.label}: {host} answered 404: no such repo or revision; "
                              "check the name and the revision")
    if not token:
        return HubAccessError(f"{repo.label}: {host} answered {status}: this repo is private or needs a login: "
                              "set MODELSCOPE_API_TOKEN (your ModelScope access token)")
    return HubAccessError(f"{repo.label}: {host} answered {status}: the token was refused or has no access; "
                          "set a valid MODELSCOPE_API_TOKEN")
