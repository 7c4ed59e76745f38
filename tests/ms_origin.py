"""A local ModelScope hub on 127.0.0.1: the part of ``/api/v1`` modelscope-hub 0.5 downloads with.

Every JSON answer is wrapped as ModelScope wraps it: ``{"Code": 200, "Data": ..., "Message",
"Success": true}`` (errors: ``Code`` 404/401, ``Success`` false, and the HTTP status).

* ``GET /api/v1/models/O/N/repo/files?Revision=&Recursive=True[&Root=]``: ``Data.Files``, each
  ``{"Name", "Path", "Type": "blob"|"tree", "Size", "Sha256", "Revision"}`` (no pagination; a
  repo's ``listed_sha256``/``listed_revision`` override an entry's, ``extra_entries`` come first);
* ``GET /api/v1/datasets/O/N/repo/tree?Revision=&Recursive=True&PageNumber=&PageSize=[&Root=]``:
  the same entries, ``PageSize`` a page (a short page is the last);
* ``GET /api/v1/{models,datasets}/O/N/repo?Revision=&FilePath=``: the bytes, ``Range`` and
  ``If-Range`` honoured; files of ``big`` bytes or more answer 302 to a separate content
  server (``cdn``, a ``tests.origin.OriginServer``), as ModelScope sends large files
  to object storage;
* ``GET /api/v1/{models,datasets}/O/N/revisions``: ``Data.RevisionMap.Branches``;
* a ``private`` repo answers 401 unless ``Authorization: Bearer TOKEN`` (or the
  ``m_session_id`` cookie) carries ``token``.

Every request is appended to ``requests`` (method, path, headers, status, body bytes).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from tests.hub_origin import _parse_range
from tests.helpers import LocalHubApi


def use_endpoint(monkeypatch, endpoint: str, cache) -> None:
    """Point this test's ModelScope client and prefetch at ``endpoint``, with ``cache`` as
    ``MODELSCOPE_CACHE``, and drop the variables that would point them elsewhere."""
    monkeypatch.setenv("MODELSCOPE_ENDPOINT", endpoint)
    monkeypatch.setenv("MODELSCOPE_CACHE", str(cache))
    for var in ("MODELSCOPE_DOMAIN", "MODELSCOPE_API_TOKEN"):
        monkeypatch.delenv(var, raising=False)


@dataclass
class MsRequest:
    method: str
    path: str
    headers: dict
    status: int | None = None
    body_bytes: int = 0


@dataclass
class MsRepo:
    kind: str  # models | datasets
    repo_id: str
    files: dict[str, bytes]
    revisions: tuple[str, ...] = ("master",)
    private: bool = False
    listed_sha256: dict[str, str] = field(default_factory=dict)  # a lying listing, per path ("": listed without one)
    listed_revision: dict[str, str] = field(default_factory=dict)  # an entry's "Revision" (default 40 zeros)
    extra_entries: list[dict] = field(default_factory=list)  # listed as they are before the files (a broken hub's)

    def sha256(self, path: str) -> str:
        if path in self.listed_sha256:
            return self.listed_sha256[path]
        return hashlib.sha256(self.files[path]).hexdigest()


@dataclass
class MsServer(LocalHubApi):
    """``MsServer()`` as a context manager; ``url`` is the endpoint (``MODELSCOPE_ENDPOINT``)."""

    token: str = "ms-test-token-secret-0123456789"
    big: int = 1 << 20
    page_size_cap: int = 200
    requests: list[MsRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._init_api()
        self.repos: dict[tuple[str, str], MsRepo] = {}

    def add_repo(self, repo_id: str, files: dict[str, bytes], *, kind: str = "models", private: bool = False,
                 revisions=("master",), listed_sha256: dict[str, str] | None = None,
                 listed_revision: dict[str, str] | None = None, extra_entries: list[dict] | None = None) -> MsRepo:
        """Add (or replace: a repo updated at its branch) a repo."""
        repo = MsRepo(kind, repo_id, dict(files), tuple(revisions), private, dict(listed_sha256 or {}),
                      dict(listed_revision or {}), list(extra_entries or []))
        for path, data in files.items():
            if len(data) >= self.big:
                self.cdn.put(self._cdn_name(repo, path), data, etag=f'"{hashlib.sha256(data).hexdigest()}"')
        with self.lock:
            self.repos[(kind, repo_id)] = repo
        return repo

    @staticmethod
    def _cdn_name(repo: MsRepo, path: str) -> str:
        return f"oss/{repo.kind}/{repo.repo_id}/{hashlib.sha1(path.encode()).hexdigest()}"

    def file_requests(self) -> list[MsRequest]:
        """Requests for file contents (on the hub; the CDN keeps its own log)."""
        with self.lock:
            return [r for r in self.requests if urlsplit(r.path).path.endswith("/repo") and r.method == "GET"]

    def content_bytes(self) -> int:
        with self.lock:
            hub = sum(r.body_bytes for r in self.requests if urlsplit(r.path).path.endswith("/repo"))
        return hub + self.cdn.bytes_sent


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A head and a small body go out in two writes: with Nagle on, the body waits for the
    # client's delayed ACK (~40 ms a request on a kept-alive connection). Real servers set
    # TCP_NODELAY (nginx's tcp_nodelay, on by default), and so does this one.
    disable_nagle_algorithm = True

    def log_message(self, format, *args) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:
        ms: MsServer = self.server.ms
        self.record = MsRequest("GET", self.path, dict(self.headers))
        with ms.lock:
            ms.requests.append(self.record)
        parts = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        segs = parts.path.strip("/").split("/")
        if segs[:2] != ["api", "v1"] or len(segs) < 6 or segs[2] not in ("models", "datasets"):
            self._json(404, None, "not found", code=404)
            return
        kind, repo_id, rest = segs[2], "/".join(segs[3:5]), "/".join(segs[5:])
        repo = ms.repos.get((kind, repo_id))
        if repo is None:
            self._json(404, None, f"repo {repo_id} not found", code=10010205001)
            return
        if repo.private and not self._authorized(ms):
            self._json(401, None, "login required", code=10010205002)
            return
        if rest == "revisions":
            branches = [{"Revision": r, "CreatedAt": 1700000000} for r in repo.revisions]
            self._json(200, {"RevisionMap": {"Branches": branches, "Tags": []}})
            return
        revision = query.get("Revision") or "master"
        if revision not in repo.revisions:
            self._json(404, None, f"revision {revision} not found", code=10010205003)
            return
        if rest in ("repo/files", "repo/tree"):
            self._listing(repo, query, paged=rest == "repo/tree")
        elif rest == "repo":
            self._file(ms, repo, query.get("FilePath", ""))
        else:
            self._json(404, None, "not found", code=404)

    def _authorized(self, ms: MsServer) -> bool:
        auth = self.headers.get("Authorization", "")
        cookie = self.headers.get("Cookie", "")
        return auth == f"Bearer {ms.token}" or f"m_session_id={ms.token}" in cookie

    def _listing(self, repo: MsRepo, query: dict, *, paged: bool) -> None:
        root = (query.get("Root") or "").strip("/")
        entries = [dict(e) for e in repo.extra_entries if not root or str(e.get("Path", "")).startswith(root + "/")]
        dirs = set()
        for path in sorted(repo.files):
            if root and not path.startswith(root + "/"):
                continue
            parts = path.split("/")
            for i in range(1, len(parts)):
                dirs.add("/".join(parts[:i]))
            entries.append({"Name": parts[-1], "Path": path, "Type": "blob", "Size": len(repo.files[path]),
                            "Sha256": repo.sha256(path), "Revision": repo.listed_revision.get(path, "0" * 40),
                            "IsLFS": len(repo.files[path]) > 1024})
        entries += [{"Name": d.rsplit("/", 1)[-1], "Path": d, "Type": "tree", "Size": 0, "Sha256": ""}
                    for d in sorted(dirs) if not root or d.startswith(root + "/")]
        if paged:
            size = min(int(query.get("PageSize") or 100), self.server.ms.page_size_cap)
            page = int(query.get("PageNumber") or 1)
            entries = entries[(page - 1) * size: page * size]
        self._json(200, {"Files": entries})

    def _file(self, ms: MsServer, repo: MsRepo, path: str) -> None:
        data = repo.files.get(path)
        if data is None:
            self._json(404, None, f"file {path} not found", code=10010205004)
            return
        if len(data) >= ms.big:
            self._send(302, b"", headers={"Location": ms.cdn.url_for(ms._cdn_name(repo, path))})
            return
        etag = f'"{hashlib.sha256(data).hexdigest()}"'
        headers = {"ETag": etag, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        status, body = 200, data
        wanted, if_range = self.headers.get("Range"), self.headers.get("If-Range")
        if wanted and (if_range is None or if_range == etag):
            span = _parse_range(wanted, len(data))
            if span == "unsatisfiable":
                self._send(416, b"", headers={**headers, "Content-Range": f"bytes */{len(data)}"})
                return
            if span is not None:
                a, b = span
                status, body = 206, data[a:b + 1]
                headers["Content-Range"] = f"bytes {a}-{b}/{len(data)}"
        self._send(status, body, headers=headers)

    def _json(self, status: int, data, message: str = "", *, code: int = 200) -> None:
        payload = {"Code": code if status != 200 else 200, "Data": data, "Message": message,
                   "RequestId": "test", "Success": status == 200}
        self._send(status, json.dumps(payload).encode(), headers={"Content-Type": "application/json"})

    def _send(self, status: int, data: bytes, *, headers: dict) -> None:
        self.record.status = status
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data:
            self.record.body_bytes += len(data)
            self.wfile.write(data)


MsServer.api_handler = _Handler
MsServer.api_name = "ms"
