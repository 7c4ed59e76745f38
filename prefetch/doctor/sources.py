"""``prefetch doctor``'s dataset-source checks: can each source deliver, and how fast?

Each source (an origin, a documented copy, a dataset mirror, the team store) is tried
step by step on one file: DNS, TCP, TLS, a ranged first byte, then ~2 s of throughput.
The verdict names the step that failed, a web page where a file should be (captive
portal, block page), or a rate below ``SLOW``. Sources run in parallel, each with its
own deadline.

The host is reached as ``get`` reaches it: ``reach_host.py``.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import urljoin, urlsplit

from prefetch.doctor.reach_host import resolve, tls_context

SLOW = 100 * 1024  # bytes/s below which a source counts as throttled
HTML_MAGIC = (b"<!doctype html", b"<html", b"<head", b"<body", b"<?xml", b"<script")


@dataclass
class SourceVerdict:
    """One source: what it is, what it is used for, and how it did."""

    source: str  # base URL (or s3://bucket/prefix/)
    kind: str  # origin | copy | mirror | store
    probe: str  # the file's URL that was tried (a presigned URL's query is dropped)
    files: int  # how many files of the registry this source serves
    verdict: str = "ok"  # ok | missing | throttled | portal | blocked
    step: str | None = None  # dns | tcp | tls | http | proxy | setup (for blocked; proxy for a portal page through it)
    detail: str = ""
    rate: float | None = None  # bytes/s over the throughput window
    hint: str = ""
    elapsed: float = 0.0

    @property
    def works(self) -> bool:
        return self.verdict in ("ok", "throttled", "missing")


@dataclass
class _Target:
    source: str
    kind: str
    url: str  # what to GET (may be an s3:// object)
    files: set[str] = field(default_factory=set)


def collect_sources(registry, names: list[str] | None, *, mirrors: list[str], use_origin: bool) -> list[_Target]:
    """The sources ``get`` would use for ``names`` (default: every dataset), one probe file each.

    Origins and copies are grouped by directory (``https://host/dir/``); the probe is the
    largest file known there (so ~2 s of reading measures a rate), else the first.
    """
    specs = [registry.get(n) for n in names] if names else list(registry.datasets.values())
    files = [f for spec in specs for f in spec.files]
    targets: dict[str, _Target] = {}
    for base in mirrors:
        probe = _pick(files)
        kind = "store" if base.startswith("s3://") else "mirror"
        target = targets.setdefault(base, _Target(base, kind, base + probe.name))
        target.files.update(f.name for f in files)
    if use_origin:
        for f in sorted(files, key=lambda f: -(f.size or 0)):
            for i, url in enumerate(f.urls):
                base = url.rsplit("/", 1)[0] + "/"
                target = targets.setdefault(base, _Target(base, "origin" if i == 0 else "copy", url))
                target.files.add(f.name)
    return list(targets.values())


def _pick(files):
    with_size = [f for f in files if f.size]
    return max(with_size, key=lambda f: f.size) if with_size else files[0]


def check_sources(targets: list[_Target], *, deadline: float, env: Mapping[str, str],
                  window: float = 2.0) -> list[SourceVerdict]:
    """Check every target in parallel; each gets ``deadline`` per step and ``window`` of reading."""
    results: dict[int, SourceVerdict] = {}
    lock = threading.Lock()

    def run(index: int, target: _Target) -> None:
        verdict = _check_target(target, deadline=deadline, env=env, window=window)
        with lock:
            results[index] = verdict

    threads = [threading.Thread(target=run, args=(i, t), daemon=True) for i, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    stop = time.monotonic() + 4 * deadline + window + 1.0
    for thread in threads:
        thread.join(max(0.0, stop - time.monotonic()))
    out = []
    with lock:
        for i, t in enumerate(targets):
            out.append(results.get(i) or _blocked(_new(t, t.url), "http", f"no answer within {4 * deadline + window:g}s"))
    return out


def _new(target: _Target, probe: str) -> SourceVerdict:
    return SourceVerdict(source=target.source, kind=target.kind, probe=probe.split("?", 1)[0], files=len(target.files))


def _check_target(target: _Target, *, deadline: float, env: Mapping[str, str], window: float) -> SourceVerdict:
    started = time.monotonic()
    url = target.url
    if url.startswith("s3://"):
        try:
            from prefetch.store.s3 import open_store, split_object_url

            location, name = split_object_url(url)
            url = open_store(location, env=env).http_url(name)
        except Exception as exc:  # noqa: BLE001 - boto3 missing, bad configuration
            verdict = _blocked(_new(target, target.url), "setup", str(exc))
            verdict.elapsed = time.monotonic() - started
            return verdict
    verdict = _new(target, url)
    try:
        _probe(verdict, url, deadline=deadline, env=env, window=window)
    except Exception as exc:  # noqa: BLE001 - a check must never crash doctor
        _blocked(verdict, verdict.step or "http", f"{type(exc).__name__}: {exc}")
    verdict.elapsed = time.monotonic() - started
    _add_hint(verdict)
    from prefetch.net.proxies import hide_proxy_passwords

    verdict.detail = hide_proxy_passwords(verdict.detail, env)  # requests quotes a proxy it cannot parse whole
    return verdict


def _blocked(verdict: SourceVerdict, step: str, detail: str) -> SourceVerdict:
    verdict.verdict, verdict.step, verdict.detail = "blocked", step, detail
    _add_hint(verdict)
    return verdict


def _proxy_for(url: str, env: Mapping[str, str]) -> str | None:
    """The proxy ``get`` would use for ``url`` in ``env`` (requests' own choice: ``net/proxies.py``)."""
    from prefetch.net.proxies import proxy_in

    return proxy_in(url, env)


def _probe(verdict: SourceVerdict, url: str, *, deadline: float, env: Mapping[str, str], window: float) -> None:
    for _hop in range(4):
        parts = urlsplit(url)
        host, https = parts.hostname or "", parts.scheme == "https"
        port = parts.port or (443 if https else 80)
        proxy = _proxy_for(url, env)
        if proxy:
            from prefetch.net.proxies import shown_proxy

            verdict.detail = f"via proxy {shown_proxy(proxy)}; "
            _probe_via_requests(verdict, url, proxy=proxy, deadline=deadline, window=window, env=env)
            return
        verdict.step = "dns"
        try:
            ip = resolve(host, port, env=env, timeout=deadline)
        except OSError as exc:
            _blocked(verdict, "dns", str(exc))
            return
        verdict.step = "tcp"
        try:
            sock = socket.create_connection((ip, port), timeout=deadline)
        except OSError as exc:
            _blocked(verdict, "tcp", f"cannot connect to {host}:{port} ({ip}): {exc.strerror or exc}")
            return
        try:
            if https:
                verdict.step = "tls"
                try:
                    sock = tls_context(env).wrap_socket(sock, server_hostname=host)
                except (ssl.SSLError, OSError) as exc:
                    _blocked(verdict, "tls", f"TLS with {host} failed: {getattr(exc, 'reason', None) or exc}")
                    return
            verdict.step = "http"
            location = _get(verdict, sock, parts, deadline=deadline, window=window)
        finally:
            sock.close()
        if location is None:
            return
        url = urljoin(url, location)
    _blocked(verdict, "http", "too many redirects")


def _get(verdict: SourceVerdict, sock, parts, *, deadline: float, window: float) -> str | None:
    """A ranged GET on ``sock``; judge the answer. Returns a redirect's Location, else None."""
    import http.client

    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    host = parts.netloc.rsplit("@", 1)[-1]
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nRange: bytes=0-\r\nAccept-Encoding: identity\r\n"
               f"User-Agent: prefetch-doctor\r\nConnection: close\r\n\r\n")
    sock.settimeout(deadline)
    asked = time.monotonic()
    try:
        sock.sendall(request.encode("latin-1"))
        response = http.client.HTTPResponse(sock)
        response.begin()
    except (OSError, http.client.HTTPException) as exc:
        _blocked(verdict, "http", f"no HTTP answer: {exc or type(exc).__name__}")
        return None
    status = response.status
    if status in (301, 302, 303, 307, 308) and response.getheader("Location"):
        return response.getheader("Location")
    if status in (404, 410):
        verdict.verdict, verdict.detail = "missing", f"HTTP {status} for {parts.path.rsplit('/', 1)[-1]}"
        return None
    if status not in (200, 206):
        _blocked(verdict, "http", f"HTTP {status} {response.reason}".strip())
        return None
    try:
        first = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
    except (OSError, http.client.HTTPException) as exc:
        _blocked(verdict, "http", f"no first byte: {exc or type(exc).__name__}")
        return None
    first_at = time.monotonic()
    ctype = (response.getheader("Content-Type") or "").lower()
    name = parts.path.rsplit("/", 1)[-1].lower()
    is_page = not name.endswith((".html", ".htm")) and (
        ctype.startswith("text/html") or first.lstrip()[:16].lower().startswith(HTML_MAGIC))
    if is_page:
        verdict.verdict = "portal"
        verdict.detail = f"HTTP {status} with a web page ({ctype or 'HTML'}) instead of the file"
        return None
    got, ended = len(first), not first
    while time.monotonic() - first_at < window:
        try:
            chunk = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
        except (OSError, http.client.HTTPException):
            break
        if not chunk:
            ended = True
            break
        got += len(chunk)
    spent = max(time.monotonic() - first_at, 1e-3)
    verdict.rate = got / spent
    latency = (first_at - asked) * 1000
    verdict.detail = (f"HTTP {status}, first byte in {latency:.0f} ms, "
                      f"{_human(verdict.rate)}/s over {spent:.1f}s{' (whole file)' if ended else ''}")
    if not ended and verdict.rate < SLOW:
        verdict.verdict = "throttled"
    return None


def _probe_via_requests(verdict: SourceVerdict, url: str, *, proxy: str, deadline: float, window: float,
                        env: Mapping[str, str]) -> None:
    import requests

    from prefetch.errors import NetworkError
    from prefetch.net.checks import ca_bundle

    try:
        verify = ca_bundle(env)  # the bundle get trusts (requests alone would skip SSL_CERT_FILE / SSL_CERT_DIR)
    except NetworkError as exc:
        _blocked(verdict, "tls", verdict.detail + str(exc))
        return

    from prefetch.net.proxies import proxy_page, shown_proxy

    shown = shown_proxy(proxy)
    verdict.step = "http"
    try:
        with requests.get(url, headers={"Range": "bytes=0-", "Accept-Encoding": "identity"},
                          proxies={"http": proxy, "https": proxy}, stream=True, timeout=(deadline, deadline),
                          verify=verify) as r:
            if r.status_code == 407:
                _blocked(verdict, "proxy", verdict.detail + "the proxy asks for a user name and password (HTTP 407)")
                return
            if r.status_code >= 400:
                own = proxy_page(_Answer(r), shown, url)
                if own is not None:
                    _blocked(verdict, "proxy", verdict.detail + str(own).split(";")[0])
                    return
            if r.status_code in (404, 410):
                verdict.verdict, verdict.detail = "missing", verdict.detail + f"HTTP {r.status_code}"
                return
            if r.status_code not in (200, 206):
                _blocked(verdict, "http", verdict.detail + f"HTTP {r.status_code}")
                return
            start, got = time.monotonic(), 0
            for chunk in r.iter_content(65536):
                if got == 0 and (r.headers.get("Content-Type", "").lower().startswith("text/html")
                                 or chunk.lstrip()[:16].lower().startswith(HTML_MAGIC)):
                    verdict.verdict, verdict.detail = "portal", verdict.detail + "a web page instead of the file"
                    verdict.step = "proxy"  # it came through the proxy: its login or block page, maybe
                    return
                got += len(chunk)
                if time.monotonic() - start > window:
                    break
            verdict.rate = got / max(time.monotonic() - start, 1e-3)
            verdict.detail += f"HTTP {r.status_code}, {_human(verdict.rate)}/s"
            if verdict.rate < SLOW and time.monotonic() - start > window:
                verdict.verdict = "throttled"
    except requests.exceptions.ProxyError as exc:
        from prefetch.net.failures import describe_error, spoke_plain_http

        cause = describe_error(exc)
        what = ("the proxy asks for a user name and password (HTTP 407)" if "407" in cause
                else "the proxy answered in plain HTTP, not TLS (its variable says https://)" if spoke_plain_http(cause)
                else f"the proxy failed: {cause}")
        _blocked(verdict, "proxy", verdict.detail + what)
    except requests.RequestException as exc:
        _blocked(verdict, "http", verdict.detail + f"{type(exc).__name__}: {exc}")


class _Answer:
    """A requests response seen as ``prefetch.net.proxies`` reads one (status, headers, peek)."""

    def __init__(self, r) -> None:
        self.status, self.headers, self._r = r.status_code, r.headers, r

    def peek(self, n: int) -> bytes:
        return self._r.raw.read(n)


def _human(rate: float) -> str:
    from prefetch.ui.render import human_bytes

    return human_bytes(int(rate))


def _add_hint(verdict: SourceVerdict) -> None:
    other = "use another source: a team store or mirror (`--mirror`, `--seed s3://...`)"
    if verdict.verdict == "blocked":
        verdict.hint = {
            "dns": f"the name does not resolve from this network (blocked or no DNS); {other}",
            "tcp": f"connections are refused or dropped (blocked from here); {other}",
            "tls": "the TLS handshake fails: an intercepting proxy (set REQUESTS_CA_BUNDLE to its CA) "
                   f"or a wrong clock; or {other}",
            "http": f"the server answers but not with the file; {other}",
            "proxy": "the proxy is what fails, not the source: check that it runs at that address, its user "
                     "name and password (http://USER:PASSWORD@HOST:PORT in the proxy variable), or skip it for "
                     "this host with no_proxy",
            "setup": "install the s3 extra (pip install 'prefetch-datasets[s3]') and check AWS_* settings",
        }.get(verdict.step or "", other)
    elif verdict.verdict == "portal" and verdict.step == "proxy":
        verdict.hint = ("a web page came back through the proxy: the proxy's login or block page (the proxy may be "
                        "what fails), or a captive portal beyond it: log in through a browser, skip the proxy for "
                        f"this host with no_proxy, or {other}")
    elif verdict.verdict == "portal":
        verdict.hint = f"a captive portal or block page: log in to the network in a browser, or {other}"
    elif verdict.verdict == "throttled":
        verdict.hint = (f"only {_human(verdict.rate or 0)}/s: prefer a faster source; prefetch also reads the"
                        " other copies at once, and a team store (`--seed s3://...`) fetches it once per team")
    elif verdict.verdict == "missing":
        verdict.hint = "reachable, but without this file: fill it with `prefetch export DIR` or `prefetch push`"
    else:
        verdict.hint = ""
