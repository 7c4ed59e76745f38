"""A ``get`` request: what the user asked for, as a job record stores it, and its headers.

The foreground CLI, the background worker and the Python API all build a
``GetRequest`` and call ``planning.run_request``; a job record stores it as JSON
(header values, which are credentials, are passed to a worker in its environment).
"""

from __future__ import annotations

import os
from dataclasses import MISSING, asdict, field
from typing import Mapping

from prefetch.errors import UsageError
from prefetch.model.lean import dataclass

HEADERS_ENV = "PREFETCH_JOB_HEADERS"  # how a background worker gets --header values (never stored)
URLS_ENV = "PREFETCH_JOB_URLS"  # ... and the passwords of https://user:password@host/ URLs
HIDDEN_PASSWORD = "***"


@dataclass
class GetRequest:
    """Everything ``prefetch get`` was asked to do (JSON-serialisable)."""

    names: list[str]
    cache_dir: str | None = None
    mirrors: list[str] = field(default_factory=list)
    also_origin: bool = False
    connections: int | None = None
    sha256: str | None = None
    md5: str | None = None
    output: str | None = None
    registries: list[str] = field(default_factory=list)
    fail_fast: bool = False
    job: str | None = None
    mirrors_from_env: bool = False  # ``mirrors`` were pinned from PREFETCH_DATASET_MIRROR (not --mirror)
    seed: str | None = None  # s3://BUCKET/PREFIX: read from it, and upload what it lacks
    # Plain URLs from -i files (and the API): {"url", "sha256", "md5", "out", "dir"}.
    urls: list[dict] = field(default_factory=list)
    output_dir: str | None = None  # -P: where URL downloads go (default: the current dir)
    content_disposition: bool = False  # URL downloads named by the server's Content-Disposition (flow/served_names.py)
    extract: bool = False  # extract URL downloads that are archives
    extract_to: str | None = None  # ... into this dir (default: beside the file)
    limit_rate: str | float | None = None  # total bytes/s of the whole command ("2M")
    headers: list[str] = field(default_factory=list)  # "Name: value" (to_dict keeps names only)
    force: bool = False  # download again even when a good file is in place
    # hf:// names only (prefetch/hf/): file globs and the hub cache root. For them `mirrors`
    # holds the Hub endpoint (one catalog name or URL), not flat dataset mirrors.
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    hub_cache: str | None = None
    lfs_from: str | None = None  # hf://: a ModelScope repo (ms://OWNER/NAME) with the same LFS files, one more source
    ms_cache: str | None = None  # ms:// names: the ModelScope cache root, fixed for a background job
    nltk_data: str | None = None  # nltk: names: NLTK's data dir, fixed for a background job
    retries: int | None = None  # retries in a row without progress (default 8, $PREFETCH_RETRIES)
    timeout: float | None = None  # seconds without a byte before giving up (default 30, $PREFETCH_TIMEOUT)
    # torchvision: names and --torch-hub (prefetch/flow/planners/torchvision.py)
    root: str | None = None  # torchvision datasets' root (default ./data, as in torchvision's examples)
    torch_hub: bool = False  # URL downloads go to torch.hub's checkpoints dir, checked by the name's sha256 prefix
    torch_checkpoints: str | None = None  # torch.hub's checkpoints dir, fixed for a background job
    host_connections: int | None = None  # connections to one host, all files together (default 32)
    nice: bool | None = None  # a -b worker at low CPU and I/O priority (None: $PREFETCH_NICE, default yes)
    proxies: list[str] = field(default_factory=list)  # a job's proxy variables, passwords hidden (jobs/job_proxies.py)
    # The endpoint variable a job's hf:// (HF_ENDPOINT) and ms:// or --lfs-from (MODELSCOPE_ENDPOINT,
    # else MODELSCOPE_DOMAIN) names read in the shell that started it: a resume from a shell that
    # sets none asks the same Hub (planners/base.py, pinned_endpoint).
    hub_endpoint: str | None = None
    ms_endpoint: str | None = None

    def to_dict(self) -> dict:
        """The request as stored in a job record: header values (credentials) left out."""
        data = asdict(self)
        data["headers"] = [h.partition(":")[0].strip() for h in self.headers]
        data["names"] = [hide_url_password(n) for n in self.names]
        data["urls"] = [dict(e, url=hide_url_password(e["url"])) if isinstance(e, dict) and "url" in e else e
                        for e in self.urls]
        data["mirrors"] = [hide_url_password(m) for m in self.mirrors]  # (a private mirror's or Hub's login)
        for key in ("hub_endpoint", "ms_endpoint"):
            data[key] = hide_url_password(data[key]) if data[key] else data[key]
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> "GetRequest":
        """Rebuild a request stored in a job record, every field type-checked.

        Raises:
            UsageError: a field has the wrong type (a hand-edited or damaged record).
        """
        if not isinstance(data, Mapping):
            raise UsageError("the job's stored request is not an object; start again with `prefetch get ... -b`")
        known = {f for f in cls.__dataclass_fields__}
        fields = {k: v for k, v in data.items() if k in known}
        for key, value in fields.items():
            if not field_value_ok(key, value):
                raise UsageError(f"the job's stored request is corrupt: {key!r} is {value!r:.40}; "
                                 f"start again with `prefetch get ... -b`")
        missing = [f.name for f in cls.__dataclass_fields__.values()
                   if f.name not in fields and f.default is MISSING and f.default_factory is MISSING]
        if missing:
            raise UsageError(f"the job's stored request is corrupt: it has no {missing[0]!r}; "
                             f"start again with `prefetch get ... -b`")
        return cls(**fields)


def field_value_ok(key: str, value) -> bool:
    """Whether ``value`` has the type of the request's field ``key`` (a stored record's, or the API's)."""
    kind = _REQUEST_TYPES[key]
    if kind is dict:  # a list of objects (the -i URL entries)
        ok = isinstance(value, list) and all(isinstance(v, Mapping) for v in value)
    elif kind is list:
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    else:
        ok = value is None or (isinstance(value, kind) and (kind is bool or not isinstance(value, bool)))
    if key in ("names", "also_origin", "fail_fast", "mirrors_from_env", "extract", "force", "torch_hub",
               "content_disposition") and value is None:
        ok = False
    if isinstance(value, float) and not (value == value and abs(value) != float("inf")):
        ok = False  # NaN or Infinity: Python's json reads them, no field means them
    return ok


_REQUEST_TYPES = {
    "names": list, "cache_dir": str, "mirrors": list, "also_origin": bool, "connections": int,
    "sha256": str, "md5": str, "output": str, "registries": list, "fail_fast": bool, "job": str,
    "mirrors_from_env": bool, "seed": str, "urls": dict, "output_dir": str, "extract": bool,
    "extract_to": str, "limit_rate": (str, int, float), "headers": list, "force": bool,
    "include": list, "exclude": list, "hub_cache": str, "lfs_from": str, "ms_cache": str, "nltk_data": str, "retries": int,
    "timeout": (int, float), "host_connections": int, "root": str, "torch_hub": bool, "torch_checkpoints": str,
    "nice": bool, "content_disposition": bool, "proxies": list, "hub_endpoint": str, "ms_endpoint": str,
}
assert set(_REQUEST_TYPES) == set(GetRequest.__dataclass_fields__), "every stored field is type-checked"




def parse_headers(lines: list[str]) -> dict[str, str]:
    """``["Name: value", ...]`` -> {name: value}.

    Raises:
        UsageError: not ``Name: value``, a control character (header injection), or
            a name without its value (a job record keeps header names only).
    """
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = str(line).partition(":")
        name, value = name.strip(), value.strip()
        if not sep:
            raise UsageError(
                f"--header {name!r} has no value: header values (credentials) are never stored in job records, "
                f"so a resumed job cannot send them; run the same `prefetch get ... --header` again (it resumes)"
            )
        if not name or any(c in name for c in " \t()<>@,;:\\\"/[]?={}") or not name.isascii():
            raise UsageError(f"--header needs 'Name: value'; {name!r} is not a header name")
        if any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise UsageError(f"--header {name}: the value holds a control character")
        headers[name] = value
    return headers


def job_environment(request: GetRequest, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a background worker: header values passed here, never in its record.

    The environment of a process is readable only by its user; the worker takes the
    values out of its own environment as soon as it starts.
    """
    import json

    out = dict(os.environ if env is None else env)
    if request.headers:
        out[HEADERS_ENV] = json.dumps(list(request.headers))
    if url_passwords(request):
        out[URLS_ENV] = json.dumps(url_passwords(request))
    return out


def hide_url_password(url: str) -> str:
    """``https://user:password@host/x`` -> ``https://user:***@host/x``, ``https://TOKEN@host/x`` ->
    ``https://***@host/x``: what a job record stores."""
    from urllib.parse import urlsplit

    if "@" not in url or "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        userinfo, at, host = parts.netloc.rpartition("@")
    except ValueError:
        return url
    if not at or userinfo in (HIDDEN_PASSWORD, "") or userinfo.endswith(f":{HIDDEN_PASSWORD}"):
        return url
    if ":" not in userinfo:  # a token alone (``https://TOKEN@host``, as git hosts take one): all of it hidden
        return parts._replace(netloc=f"{HIDDEN_PASSWORD}@{host}").geturl()
    user = userinfo.partition(":")[0]
    return parts._replace(netloc=f"{user}:{HIDDEN_PASSWORD}@{host}").geturl()


def shown_url(url: str) -> str:
    """``url`` as ``status`` and a job's log show it: its password hidden (``hide_url_password``)
    and a signed query (a presigned URL's key id and signature) shown as ``(signed)``."""
    from prefetch.net.urls import hide_signed_query

    return hide_signed_query(hide_url_password(url))


def url_passwords(request: GetRequest) -> dict[str, str]:
    """{stored URL: URL with its password} for every URL of ``request`` that carries one (its
    names and entries, ``--mirror``, the pinned Hub endpoints)."""
    urls = list(request.names) + [e["url"] for e in request.urls if isinstance(e, dict) and "url" in e]
    urls += [*request.mirrors, *(u for u in (request.hub_endpoint, request.ms_endpoint) if u)]
    return {hide_url_password(u): u for u in urls if hide_url_password(u) != u}


def check_password_given(url: str, what: str, again: str) -> None:
    """Refuse ``url`` read from a job record with its password hidden (``hide_url_password``'s
    mark): a resumed job would send ``***``.

    Raises:
        UsageError: it is such a URL; ``what`` names it, ``again`` says what to do.
    """
    if f"{HIDDEN_PASSWORD}@" in url:
        from urllib.parse import urlsplit

        try:
            userinfo, at, _ = urlsplit(url).netloc.rpartition("@")
        except ValueError:
            userinfo = at = ""
        hidden = bool(at) and (userinfo == HIDDEN_PASSWORD or userinfo.endswith(f":{HIDDEN_PASSWORD}"))
        if hidden:
            raise UsageError(f"{what}: its password is never stored in job records, so a resumed job cannot "
                             f"send it; {again}")


def restore_url_passwords(request: GetRequest, env: Mapping[str, str]) -> None:
    """Put back, in a worker's request, the URL passwords its launcher passed in ``URLS_ENV``."""
    import json

    try:
        passed = json.loads(env.get(URLS_ENV) or "{}")
    except ValueError:
        passed = {}
    if not isinstance(passed, dict) or not passed:
        return
    request.names = [passed.get(n, n) for n in request.names]
    request.urls = [dict(e, url=passed.get(e["url"], e["url"])) if isinstance(e, dict) and "url" in e else e
                    for e in request.urls]
    request.mirrors = [passed.get(m, m) for m in request.mirrors]
    request.hub_endpoint = passed.get(request.hub_endpoint, request.hub_endpoint) if request.hub_endpoint else None
    request.ms_endpoint = passed.get(request.ms_endpoint, request.ms_endpoint) if request.ms_endpoint else None


def restore_headers(names: list[str], env: Mapping[str, str]) -> list[str]:
    """Header lines for a worker: the values its launcher passed in ``HEADERS_ENV`` for ``names``."""
    import json

    try:
        passed = json.loads(env.get(HEADERS_ENV) or "[]")
    except ValueError:
        passed = []
    by_name = {str(h).partition(":")[0].strip().lower(): str(h) for h in passed if ":" in str(h)}
    return [by_name.get(str(n).strip().lower(), str(n)) for n in names]


