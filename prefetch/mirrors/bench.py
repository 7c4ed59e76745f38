"""The mirror speed test: every mirror in parallel, each within its own deadline.

Per mirror: latency is the time until the first response's headers; throughput is
the body rate of a real package file (the catalog's ``probe``, or ``[bench] file``
found on ``<index>/<[bench] project>/`` just as pip finds it). A mirror that does
not finish in time is cut off: with some bytes it counts as ``partial`` (the rate so
far), with none as ``timeout``. Unreachable mirrors are reported, never fatal here.

Bytes that arrived whole are checked: against the sha256 PyPI publishes for the default
file (``catalog.PUBLISHED_SHA256``) or the user's ``[bench] sha256``, whatever the mirror's
page says; else against the page's ``#sha256=``; else, for a wheel, by its zip header.
"""

from __future__ import annotations

import hashlib
import http.client
import queue
import re
import threading
import time
from dataclasses import dataclass
from enum import Enum
from typing import Callable
from urllib.parse import unquote, urljoin, urlsplit

from prefetch.net.http import Client, Timeouts, follow_redirects
from prefetch.net.failures import TransientHTTPError
from prefetch.net.sniff import looks_like_html
from prefetch.mirrors.catalog import DEFAULT_BENCH_FILE, DEFAULT_BENCH_PROJECT, PUBLISHED_SHA256, PUBLISHED_SIZE, Mirror

_HREF = re.compile(r"""href\s*=\s*["']([^"']+)["']""", re.I)
_SHA256 = re.compile(r"sha256=([0-9a-fA-F]{64})$")
_ZIP_MAGIC = b"PK\x03\x04"  # a wheel's first bytes (a hashless index leaves only this to check)
_GRACE = 1.0  # seconds past the deadline before an unfinished thread is abandoned


class BenchStatus(str, Enum):
    """How one mirror's measurement ended."""

    OK = "ok"  # the whole probe file arrived in time
    PARTIAL = "partial"  # cut off at the deadline with some bytes: rate so far
    TIMEOUT = "timeout"  # nothing (or no body) within the deadline
    ERROR = "error"  # refused, DNS failure, HTTP error, probe not found


@dataclass(frozen=True)
class BenchResult:
    """One mirror's measurement."""

    name: str
    index_url: str
    status: BenchStatus
    probe_url: str | None = None
    latency_s: float | None = None
    throughput_bps: float | None = None  # bytes per second of the probe body
    bytes: int = 0
    seconds: float = 0.0
    error: str | None = None

    @property
    def usable(self) -> bool:
        """True when it delivered bytes, so its rate means something."""
        return self.status in (BenchStatus.OK, BenchStatus.PARTIAL) and bool(self.throughput_bps)


@dataclass(frozen=True)
class BenchReport:
    """All measurements, best first."""

    results: tuple[BenchResult, ...]
    deadline_s: float

    @property
    def fastest(self) -> BenchResult | None:
        """The usable mirror with the highest throughput."""
        usable = [r for r in self.results if r.usable]
        return usable[0] if usable else None


def bench_mirrors(
    mirrors: list[Mirror],
    *,
    deadline: float = 8.0,
    project: str = DEFAULT_BENCH_PROJECT,
    probe_file: str = DEFAULT_BENCH_FILE,
    probe_sha256: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> BenchReport:
    """Measure ``mirrors`` (those with a PyPI index) in parallel, each within ``deadline`` seconds.

    ``probe_sha256``: the user's pin for ``probe_file`` (``[bench] sha256``); a file PyPI's hash
    is known for (``PUBLISHED_SHA256``) is held to that one without it.
    """
    targets = [m for m in mirrors if m.pypi]
    results: "queue.Queue[BenchResult]" = queue.Queue()

    def worker(mirror: Mirror) -> None:
        try:
            result = measure_mirror(mirror, deadline=deadline, project=project, probe_file=probe_file,
                                    probe_sha256=probe_sha256, clock=clock)
        except Exception as exc:  # noqa: BLE001 - one mirror's bug must not sink the others
            result = BenchResult(mirror.name, mirror.pypi or "", BenchStatus.ERROR, error=f"{type(exc).__name__}: {exc}")
        results.put(result)

    # daemon threads: a mirror stuck in DNS cannot keep the process alive past the deadline
    for mirror in targets:
        threading.Thread(target=worker, args=(mirror,), daemon=True, name=f"bench-{mirror.name}").start()
    collected: dict[str, BenchResult] = {}
    stop = clock() + deadline + _GRACE
    while len(collected) < len(targets):
        remaining = stop - clock()
        if remaining <= 0:
            break
        try:
            result = results.get(timeout=remaining)
        except queue.Empty:
            break
        collected[result.name] = result
    for mirror in targets:
        if mirror.name not in collected:
            collected[mirror.name] = BenchResult(
                mirror.name,
                mirror.pypi or "",
                BenchStatus.TIMEOUT,
                seconds=deadline,
                error=f"no answer within the {deadline:g}s deadline",
            )
    # A pinned file's bytes are checked only once whole: a mirror cut off at the deadline (partial) comes
    # after every one whose bytes were checked, however fast its unchecked bytes came.
    pinned = pinned_sha256(probe_file, probe_file, probe_sha256) is not None
    ordered = sorted(
        collected.values(),
        key=lambda r: (not r.usable, pinned and r.status is not BenchStatus.OK, -(r.throughput_bps or 0.0),
                       r.latency_s or float("inf"), r.name),
    )
    return BenchReport(results=tuple(ordered), deadline_s=deadline)


def measure_mirror(
    mirror: Mirror,
    *,
    deadline: float,
    project: str = DEFAULT_BENCH_PROJECT,
    probe_file: str = DEFAULT_BENCH_FILE,
    probe_sha256: str | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> BenchResult:
    """Measure one mirror; never raises for network trouble."""
    from prefetch.errors import NetworkError
    from prefetch.net.checks import check_redirect

    start = clock()
    index = mirror.pypi or ""

    def remaining() -> float:
        return deadline - (clock() - start)

    def result(status: BenchStatus, **fields: object) -> BenchResult:
        return BenchResult(mirror.name, index, status, seconds=round(clock() - start, 3), **fields)  # type: ignore[arg-type]

    client = Client()
    latency = None
    digest = None  # what the probe's bytes must hash to: its pin, else the index's #sha256= (when it lists one)
    try:
        probe = mirror.probe
        if probe is None:
            page_url = index.rstrip("/") + f"/{project}/"
            t0 = clock()
            response, final_url = follow_redirects(client, page_url, headers={"Accept": "text/html"},
                                                   timeouts=_timeouts(remaining()))
            latency = clock() - t0
            with response:
                if response.status >= 400:
                    return result(BenchStatus.ERROR, latency_s=latency, error=f"HTTP {response.status} for {page_url}")
                html = response.text()
            probe, digest = find_probe(html, base_url=final_url, probe_file=probe_file)
            if probe is None:
                return result(
                    BenchStatus.ERROR, latency_s=latency, error=f"no {probe_file} (nor any wheel) listed at {page_url}"
                )
            if _file_name(probe) != probe_file and pinned_sha256(probe_file, probe_file, probe_sha256):
                # (another wheel's only hash would be the page's own: the pin held for nothing)
                return result(BenchStatus.ERROR, latency_s=latency,
                              error=f"no {probe_file} listed at {page_url} (a mirror is measured on that file,"
                                    " whose sha256 is known, or not at all)")
            try:  # the page names the probe: held to what a redirect may be (a file:// link read a local file)
                check_redirect(final_url, probe)
            except NetworkError as exc:
                return result(BenchStatus.ERROR, latency_s=latency, error=f"the probe link on {page_url}: {exc}")
            if remaining() <= 0:
                return result(BenchStatus.TIMEOUT, latency_s=latency, probe_url=probe, error=_cut(deadline))
        t0 = clock()
        response, _ = follow_redirects(client, probe, timeouts=_timeouts(remaining()))
        headers_at = clock()
        latency = latency if latency is not None else headers_at - t0
        if response.status >= 400:
            response.close()
            return result(BenchStatus.ERROR, probe_url=probe, latency_s=latency, error=f"HTTP {response.status} for {probe}")
        if _web_page(response):
            response.close()
            return result(BenchStatus.ERROR, probe_url=probe, latency_s=latency,
                          error="a web page instead of the probe file: probably a captive portal or block page")
        pin = pinned_sha256(_file_name(probe), probe_file, probe_sha256)
        digest = pin[0] if pin else digest  # (a pinned file: the page's #sha256= counts for nothing)
        hasher = hashlib.sha256() if digest else None
        head = bytearray()
        # (a pinned file of a known size: no more than one byte past it is read, and the hash then tells)
        limit = PUBLISHED_SIZE.get(_file_name(probe)) if pin and pin[0] == PUBLISHED_SHA256.get(_file_name(probe)) \
            else None
        received, finished = _read_until(response, remaining, hasher, head, limit=limit)
        elapsed = max(clock() - headers_at, 1e-6)
        rate = received / elapsed if received else None
        if looks_like_html(bytes(head)):
            return result(BenchStatus.ERROR, probe_url=probe, latency_s=latency,
                          error="a web page instead of the probe file: probably a captive portal or block page")
        if finished and hasher is None and _is_zip_name(probe) and not bytes(head).startswith(_ZIP_MAGIC):
            return result(BenchStatus.ERROR, probe_url=probe, latency_s=latency, bytes=received,
                          error=f"the {received} bytes served as the probe file are not a wheel (no zip header):"
                                " an error or block page, not the file")
        if finished and hasher is not None and hasher.hexdigest() != digest:
            return result(BenchStatus.ERROR, probe_url=probe, latency_s=latency, bytes=received,
                          error=f"the {received} bytes served as the probe file do not match "
                                + (f"{pin[1]} of {_file_name(probe)}: not the file, whatever the mirror's index says"
                                   if pin else "the index's sha256: an error or block page, not the file"))
        if finished:
            return result(BenchStatus.OK, probe_url=probe, latency_s=latency, throughput_bps=rate, bytes=received)
        status = BenchStatus.PARTIAL if received else BenchStatus.TIMEOUT
        return result(status, probe_url=probe, latency_s=latency, throughput_bps=rate, bytes=received, error=_cut(deadline))
    except TransientHTTPError as exc:
        if exc.timed_out:
            return result(BenchStatus.TIMEOUT, probe_url=mirror.probe, latency_s=latency, error=_cut(deadline))
        return result(BenchStatus.ERROR, probe_url=mirror.probe, latency_s=latency, error=exc.cause)
    except NetworkError as exc:
        return result(BenchStatus.ERROR, probe_url=mirror.probe, latency_s=latency, error=str(exc))
    except TimeoutError:  # a body (the project page's) that stopped after its headers
        return result(BenchStatus.TIMEOUT, probe_url=mirror.probe, latency_s=latency, error=_cut(deadline))
    except (OSError, http.client.HTTPException) as exc:  # reset or cut mid-body
        return result(BenchStatus.ERROR, probe_url=mirror.probe, latency_s=latency,
                      error=f"the connection broke mid-answer: {exc or type(exc).__name__}")
    finally:
        client.close()


def pinned_sha256(name: str, probe_file: str, probe_sha256: str | None) -> tuple[str, str] | None:
    """The sha256 a probe named ``name`` is held to, whatever a mirror's page says, and where it
    comes from: the user's ``[bench] sha256`` for their ``[bench] file``, else the one PyPI
    publishes for a known file; None for any other file (the page's ``#sha256=`` is all there is)."""
    if probe_sha256 and name == probe_file:
        return probe_sha256.lower(), "the [bench] sha256"
    published = PUBLISHED_SHA256.get(name)
    return (published, "the sha256 PyPI publishes") if published else None


def _file_name(url: str) -> str:
    """The file name a link names (its path's last segment, unquoted)."""
    return unquote(urlsplit(url).path.rsplit("/", 1)[-1])


def _is_zip_name(url: str) -> bool:
    """A wheel (or zip) by its name: its first bytes are a zip's, whatever the index lists."""
    return urlsplit(url).path.lower().endswith((".whl", ".zip"))


def _web_page(response) -> bool:
    """A portal's page answered for the probe (by its type; its first bytes are sniffed as they
    are read: a ``peek`` waits for 512 bytes, past the deadline on a mirror that trickles)."""
    from prefetch.net.sniff import html_content_type

    return html_content_type(response.headers.get("Content-Type"))


def _timeouts(seconds: float) -> Timeouts:
    seconds = max(seconds, 0.05)
    return Timeouts(connect=seconds, read=seconds)


def _cut(deadline: float) -> str:
    return f"cut off at the {deadline:g}s deadline"


def _read_until(
    response, remaining: Callable[[], float], hasher=None, head: bytearray | None = None, limit: int | None = None
) -> tuple[int, bool]:
    """Read the body until its end or the deadline (fed to ``hasher``; its first 512 bytes
    kept in ``head``); return (bytes, finished). With ``limit``, a body longer than that many
    bytes is finished once more arrived (what more it sends cannot be the file)."""
    import http.client

    buffer = memoryview(bytearray(256 << 10))
    received = 0
    try:
        while True:
            if remaining() <= 0:
                return received, False
            n = response.readinto(buffer)
            if not n:
                return received, True
            received += n
            if hasher is not None:
                hasher.update(buffer[:n])
            if head is not None and len(head) < 512:
                head += buffer[: min(n, 512 - len(head))]
            if limit is not None and received > limit:
                return received, True
    except (http.client.HTTPException, OSError):
        return received, False
    finally:
        response.close()


def find_probe_link(html: str, *, base_url: str, probe_file: str) -> str | None:
    """The absolute URL of ``probe_file`` on a PEP 503 project page (else its last wheel)."""
    return find_probe(html, base_url=base_url, probe_file=probe_file)[0]


def find_probe(html: str, *, base_url: str, probe_file: str) -> tuple[str | None, str | None]:
    """``find_probe_link`` plus the link's ``#sha256=`` (None when the index gives none)."""
    wheels = []
    for href in _HREF.findall(html):
        target, _, fragment = href.partition("#")
        url = urljoin(base_url, target)
        name = _file_name(url)
        found = _SHA256.match(fragment)
        item = (url, found.group(1).lower() if found else None)
        if name == probe_file:
            return item
        if name.endswith(".whl"):
            wheels.append(item)
    return wheels[-1] if wheels else (None, None)
