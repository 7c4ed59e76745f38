"""A local Hugging Face Hub on 127.0.0.1: the part of its HTTP API huggingface_hub downloads with.

* ``GET /api/{models,datasets,spaces}/ORG/NAME/revision/REV``: ``{"id", "sha", "siblings":
  [{"rfilename", "size", "blobId", "lfs": {"sha256", "size", "pointerSize"}}]}``;
* ``GET /api/.../tree/REV[/PATH]?recursive=true``: ``[{"type": "file", "path", "size", "oid",
  "lfs": {"oid", "size", "pointerSize"}}]``, ``page_size`` entries a page with
  ``Link: <...>; rel="next"`` as the Hub paginates;
* ``HEAD``/``GET /[datasets/|spaces/]ORG/NAME/resolve/REV/PATH`` with ``X-Repo-Commit``:
  regular files are served here (``ETag`` = the git blob sha1, ``Range`` and ``If-Range``
  honoured); LFS files answer 302 to a separate content server (``cdn``, a
  ``tests.origin.OriginServer``: Range, If-Range, throttles, its own request log)
  with ``X-Linked-Etag`` (the sha256) and ``X-Linked-Size``;
* gated repos answer 401 (``X-Error-Code: GatedRepo``) without ``Authorization: Bearer
  <token>``, and 403 with a wrong token, on the API and on ``resolve`` (never on the CDN,
  whose URLs stand for signed ones).

Every request is appended to ``requests`` (method, path, headers, status, body bytes).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from tests.helpers import LocalHubApi

_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class HubFile:
    path: str
    data: bytes
    lfs: bool
    oid: str = ""
    sha256: str = ""

    def __post_init__(self) -> None:
        self.sha256 = hashlib.sha256(self.data).hexdigest()
        # An LFS file's git blob is its pointer file, as on the Hub.
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.data)}\n"
        self.oid = git_blob_sha1(pointer.encode() if self.lfs else self.data)


@dataclass
class HubRepo:
    repo_type: str
    repo_id: str
    commit: str
    files: dict[str, HubFile]
    branches: dict[str, str]
    gated: bool = False


@dataclass
class HubRequest:
    method: str
    path: str
    headers: dict
    status: int | None = None
    body_bytes: int = 0
    client: tuple = ()  # the client's (address, port): one per TCP connection


@dataclass
class HubServer(LocalHubApi):
    """``HubServer()`` as a context manager; ``url`` is the endpoint (``HF_ENDPOINT``)."""

    token: str = "hf_test_token_secret_0123456789"
    page_size: int = 1000
    tree_patch: object = None  # callable(entries) -> entries: a hostile or broken listing
    requests: list[HubRequest] = field(default_factory=list)
    # TCP connections open at once that have asked for a file (``resolve``), and the most ever
    downloading: int = 0
    downloading_peak: int = 0

    def __post_init__(self) -> None:
        self._init_api()
        self.repos: dict[tuple[str, str], HubRepo] = {}

    # -- content ----------------------------------------------------------------
    def add_repo(self, repo_id: str, files: dict[str, bytes], *, repo_type: str = "model", lfs=(),
                 gated: bool = False, branches=("main",), serve: dict[str, bytes] | None = None) -> HubRepo:
        """Add a repo; ``lfs`` names the LFS files; ``serve`` makes the CDN send other bytes for a file."""
        hub_files = {p: HubFile(p, d, p in lfs) for p, d in files.items()}
        commit = hashlib.sha1(json.dumps({p: f.oid for p, f in sorted(hub_files.items())}).encode()
                              + repo_id.encode()).hexdigest()
        repo = HubRepo(repo_type, repo_id, commit, hub_files, {b: commit for b in branches}, gated=gated)
        for f in hub_files.values():
            if f.lfs:
                self.cdn.put(f"lfs/{f.sha256}", (serve or {}).get(f.path, f.data), etag=f'"{f.sha256}"')
        with self.lock:
            self.repos[(repo_type, repo_id)] = repo
        return repo

    # -- request log ------------------------------------------------------------
    def file_requests(self, *, method: str | None = "GET") -> list[HubRequest]:
        """``resolve`` requests (file contents or their redirects)."""
        with self.lock:
            return [r for r in self.requests if "/resolve/" in r.path and (method is None or r.method == method)]

    def content_bytes(self) -> int:
        """File bytes sent: regular files by the hub, LFS files by the CDN."""
        with self.lock:
            hub = sum(r.body_bytes for r in self.requests if "/resolve/" in r.path)
        return hub + self.cdn.bytes_sent

    def all_headers_text(self) -> str:
        with self.lock:
            return "\n".join(f"{r.method} {r.path} {r.headers}" for r in self.requests)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A head and a small body go out in two writes: with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms a request on a kept-alive connection). Real servers set
    # TCP_NODELAY (nginx's tcp_nodelay, on by default), and so does this one.
    disable_nagle_algorithm = True

    def log_message(self, format, *args) -> None:  # noqa: A002
        pass

    def finish(self) -> None:  # the connection ends
        try:
            super().finish()
        finally:
            if getattr(self, "downloading", False):
                with self.server.hub.lock:
                    self.server.hub.downloading -= 1

    def do_GET(self) -> None:
        self._handle(body=True)

    def do_HEAD(self) -> None:
        self._handle(body=False)

    # -- dispatch ---------------------------------------------------------------
    def _handle(self, *, body: bool) -> None:
        hub: HubServer = self.server.hub
        record = HubRequest(self.command, self.path, dict(self.headers.items()), client=tuple(self.client_address))
        with hub.lock:
            hub.requests.append(record)
            if "/resolve/" in self.path and not getattr(self, "downloading", False):
                self.downloading = True
                hub.downloading += 1
                hub.downloading_peak = max(hub.downloading_peak, hub.downloading)
        self.record = record
        split = urlsplit(self.path)
        parts = split.path.strip("/").split("/")
        try:
            if parts[0] == "api" and len(parts) >= 6 and parts[1] in _TYPES:
                self._api(hub, _TYPES[parts[1]], "/".join(parts[2:4]), parts[4:], parse_qs(split.query), body)
                return
            repo_type = "model"
            if parts[0] in ("datasets", "spaces"):
                repo_type = _TYPES[parts.pop(0)]
            if len(parts) >= 5 and parts[2] == "resolve":
                self._resolve(hub, repo_type, "/".join(parts[:2]), unquote(parts[3]),
                              unquote("/".join(parts[4:])), body)
                return
        except (IndexError, KeyError):
            pass
        self._json(404, {"error": "Not Found"}, body, code="EntryNotFound")

    def _repo(self, hub: HubServer, repo_type: str, repo_id: str, body: bool) -> HubRepo | None:
        repo = hub.repos.get((repo_type, repo_id))
        if repo is None:
            self._json(404, {"error": "Repository not found"}, body, code="RepoNotFound")
            return None
        if repo.gated:
            auth = self.headers.get("Authorization", "")
            if not auth:
                self._json(401, {"error": "Access to this repo is restricted: you must be authenticated"},
                           body, code="GatedRepo")
                return None
            if auth != f"Bearer {hub.token}":
                self._json(403, {"error": "Access to this gated repo is not granted"}, body, code="GatedRepo")
                return None
        return repo

    def _commit(self, repo: HubRepo, revision: str, body: bool) -> str | None:
        if revision in repo.branches:
            return repo.branches[revision]
        if revision == repo.commit or (len(revision) >= 7 and repo.commit.startswith(revision)):
            return repo.commit  # a full or a short commit hash, as the Hub resolves both
        self._json(404, {"error": f"Invalid rev id: {revision}"}, body, code="RevisionNotFound")
        return None

    # -- API --------------------------------------------------------------------
    def _api(self, hub: HubServer, repo_type: str, repo_id: str, rest: list[str], query: dict, body: bool) -> None:
        repo = self._repo(hub, repo_type, repo_id, body)
        if repo is None:
            return
        commit = self._commit(repo, unquote(rest[1]), body)
        if commit is None:
            return
        files = sorted(repo.files.values(), key=lambda f: f.path)
        if rest[0] == "revision":
            siblings = [{"rfilename": f.path, "size": len(f.data), "blobId": f.oid,
                         **({"lfs": {"sha256": f.sha256, "size": len(f.data), "pointerSize": 134}} if f.lfs else {})}
                        for f in files]
            self._json(200, {"id": repo_id, "sha": commit, "siblings": siblings}, body)
            return
        if rest[0] == "tree":
            prefix = unquote("/".join(rest[2:]))
            entries = [{"type": "file", "oid": f.oid, "size": len(f.data), "path": f.path,
                        **({"lfs": {"oid": f.sha256, "size": len(f.data), "pointerSize": 134}} if f.lfs else {})}
                       for f in files if not prefix or f.path.startswith(prefix.rstrip("/") + "/")]
            if hub.tree_patch is not None:
                entries = hub.tree_patch(entries)
            start = int(query.get("cursor", ["0"])[0])
            page = entries[start:start + hub.page_size]
            headers = {}
            if start + hub.page_size < len(entries):
                base = self.path.split("?")[0]
                headers["Link"] = f'<{hub.url}{base}?recursive=true&cursor={start + hub.page_size}>; rel="next"'
            self._json(200, page, body, headers=headers)
            return
        self._json(404, {"error": "Not Found"}, body)

    # -- resolve ----------------------------------------------------------------
    def _resolve(self, hub: HubServer, repo_type: str, repo_id: str, revision: str, path: str, body: bool) -> None:
        repo = self._repo(hub, repo_type, repo_id, body)
        if repo is None:
            return
        commit = self._commit(repo, revision, body)
        if commit is None:
            return
        f = repo.files.get(path)
        if f is None:
            self._json(404, {"error": "Entry not found"}, body, code="EntryNotFound", headers={"X-Repo-Commit": commit})
            return
        common = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
        if f.lfs:
            location = hub.cdn.url_for(f"lfs/{f.sha256}") + f"?X-Amz-Signature={hashlib.sha1(path.encode()).hexdigest()}"
            self._send(302, b"", body, headers={**common, "Location": location, "ETag": f'"{f.oid}"',
                                                 "X-Linked-Etag": f'"{f.sha256}"', "X-Linked-Size": str(len(f.data))})
            return
        data, status = f.data, 200
        headers = {**common, "ETag": f'"{f.oid}"', "Content-Type": "application/octet-stream"}
        wanted = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if wanted and (if_range is None or if_range == f'"{f.oid}"'):
            span = _parse_range(wanted, len(data))
            if span == "unsatisfiable":
                self._send(416, b"", body, headers={**headers, "Content-Range": f"bytes */{len(data)}"})
                return
            if span is not None:
                a, b = span
                data, status = data[a:b + 1], 206
                headers["Content-Range"] = f"bytes {a}-{b}/{len(f.data)}"
        self._send(status, data, body, headers=headers)

    # -- output -----------------------------------------------------------------
    def _json(self, status: int, value, body: bool, *, code: str | None = None, headers: dict | None = None) -> None:
        extra = dict(headers or {})
        if code:
            extra["X-Error-Code"] = code
        if status >= 400:
            extra["X-Error-Message"] = value.get("error", "") if isinstance(value, dict) else ""
        self._send(status, json.dumps(value).encode(), body, headers={"Content-Type": "application/json", **extra})

    def _send(self, status: int, data: bytes, body: bool, *, headers: dict) -> None:
        self.record.status = status
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body and data:
            self.record.body_bytes += len(data)
            self.wfile.write(data)


def _parse_range(header: str, size: int):
    """(first, last) of one ``bytes=`` range; "unsatisfiable"; None to ignore it."""
    if not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[6:].strip().partition("-")
    try:
        if not first:
            n = int(last)
            return (max(0, size - n), size - 1) if n and size else "unsatisfiable"
        a = int(first)
        b = int(last) if last else size - 1
    except ValueError:
        return None
    if a >= size or b < a:
        return "unsatisfiable"
    return a, min(b, size - 1)


HubServer.api_handler = _Handler
HubServer.api_name = "hub"
