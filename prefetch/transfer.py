"""HTTP transfer into ``<final>.part``: Range segments, resume state, retries, stalls.

One file, one or more sources (the origin and flat mirrors). Bytes go to the
``.part`` file at their own offsets; a small JSON state file beside it records
the size, each source's validator (ETag / Last-Modified) and the byte ranges
that are really on disk, so a process killed at any point resumes with at most
the bytes in flight lost.

Every resumed request carries ``If-Range``: a server whose file changed answers
200 and we start over instead of stitching two versions together (wget, curl
and aria2c all resume by size alone). A 206 is accepted only when its
``Content-Range`` starts where we asked and names the size we know.

Connections: one probe request finds the size and Range support; then 8
workers, doubling up to 32 while each step raises total throughput (``_Ramp``);
a server that keeps refusing extra connections gets fewer. A worker that runs
out of work splits the largest remaining segment (work stealing), so the faster
sources and connections naturally carry more of the file. Each worker reads
into one reused buffer and ``pwrite``s it at its offset (``prefetch.http``).
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from prefetch.errors import (
    InterruptedTransferError,
    NetworkError,
    RemoteChangedError,
)
from prefetch.events import Event, EventKind, EventSink, ignore_event
from prefetch.fsutil import local_error, mib, replace_file
from prefetch.http import Client, Timeouts, TransientHTTPError, describe_error, host_of, open_url
from prefetch.ranges import RangeSet
from prefetch.verify import new_hasher, update_from_file

STATE_VERSION = 1
_FIRST_READ = 64 << 10
_CROWDED = (429, 503)  # refusals that, while other connections deliver, mean "fewer connections"
_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.I)
_UNSATISFIED_RANGE = re.compile(r"^\s*bytes\s+\*/(\d+)\s*$", re.I)


@dataclass(frozen=True)
class TransferOptions:
    """Knobs for one transfer. Defaults suit a slow, throttled route abroad."""

    connections: int | None = None  # None: automatic (grow while throughput grows)
    max_connections: int = 32  # cap per file; the ramp reaches it only while connections pay
    initial_connections: int = 8
    min_split: int = 512 << 10  # never split into pieces smaller than this (nor than latency x rate)
    chunk_size: int = 512 << 10  # the largest read (a read returns what has arrived)
    timeouts: Timeouts = field(default_factory=Timeouts)
    stall_window: float = 20.0  # seconds ...
    stall_min_rate: float = 1024.0  # ... below this many bytes/s => reconnect
    max_attempts: int = 8  # consecutive failures without progress before giving up
    source_failures: int = 3  # failures before a source is dropped (if others remain)
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    retry_after_cap: float = 120.0
    max_restarts: int = 3  # remote changed this often => IntegrityError
    ramp_interval: float = 0.1  # the ramp judges each step over this long (after it settles)
    ramp_gain: float = 1.15  # ... and doubles again only if the rate grew by this factor
    state_interval: float = 0.5
    progress_interval: float = 0.25
    preallocate: bool = True
    # Shared by every connection of the command (--limit-rate): ``wait(n)`` after each read.
    limiter: object | None = None
    # Extra request headers (--header); sent on every request, never logged or saved.
    headers: dict = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides) -> "TransferOptions":
        """Defaults, then ``PREFETCH_*`` tuning variables, then ``overrides``."""
        env = os.environ if env is None else env
        values: dict = {}
        for key, name, kind in _ENV_KNOBS:
            if env.get(name):
                try:
                    values[key] = kind(env[name])
                except ValueError:
                    from prefetch.errors import UsageError

                    raise UsageError(f"{name}={env[name]!r} is not a valid {kind.__name__}") from None
        read = values.pop("read_timeout", None)
        connect = values.pop("connect_timeout", None)
        if read is not None or connect is not None:
            values["timeouts"] = Timeouts(
                connect=connect if connect is not None else Timeouts.connect,
                read=read if read is not None else Timeouts.read,
            )
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


_ENV_KNOBS = [
    ("read_timeout", "PREFETCH_READ_TIMEOUT", float),
    ("connect_timeout", "PREFETCH_CONNECT_TIMEOUT", float),
    ("stall_window", "PREFETCH_STALL_WINDOW", float),
    ("stall_min_rate", "PREFETCH_STALL_MIN_RATE", float),
    ("max_attempts", "PREFETCH_RETRIES", int),
    ("backoff_base", "PREFETCH_BACKOFF", float),
    ("backoff_cap", "PREFETCH_BACKOFF_CAP", float),
    ("retry_after_cap", "PREFETCH_RETRY_AFTER_CAP", float),
    ("min_split", "PREFETCH_MIN_SPLIT", int),
    ("max_connections", "PREFETCH_MAX_CONNECTIONS", int),
]


@dataclass
class TransferResult:
    """What one transfer did."""

    size: int
    digest: str | None  # hex digest of the whole file, when an algorithm was asked for
    algorithm: str | None
    downloaded: int  # body bytes received this run
    reused: int  # bytes already on disk from an earlier run
    elapsed: float
    connections: int  # most connections used at once
    restarts: int
    sources_dropped: list[str]


# ---------------------------------------------------------------------------
# state file


@dataclass
class TransferState:
    """The resume record kept beside ``.part``."""

    urls: list[str]
    size: int | None = None
    ranges: bool = True  # server honours Range (as far as we know)
    validators: dict[str, dict[str, str]] = field(default_factory=dict)  # url -> etag/last_modified
    done: list[list[int]] = field(default_factory=list)
    algorithm: str | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": STATE_VERSION,
                "urls": self.urls,
                "size": self.size,
                "ranges": self.ranges,
                "validators": self.validators,
                "done": self.done,
                "algorithm": self.algorithm,
                "saved": time.time(),
            },
            indent=1,
        )


def load_state(path: Path) -> TransferState | None:
    """Read a state file; ``None`` when missing or unusable (then start over)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != STATE_VERSION:
            return None
        done = [[int(a), int(b)] for a, b in data.get("done", [])]
        size = data.get("size")
        if size is not None:
            size = int(size)
            if any(a < 0 or b > size or a >= b for a, b in done):
                return None
        validators = {
            str(url): {str(k): str(v) for k, v in (vals or {}).items()}
            for url, vals in dict(data.get("validators", {})).items()
        }
        return TransferState(
            urls=[str(u) for u in data["urls"]],
            size=size,
            ranges=bool(data.get("ranges", True)),
            validators=validators,
            done=done,
            algorithm=data.get("algorithm"),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def save_state(path: Path, state: TransferState) -> None:
    """Write the state atomically (temp file + rename)."""
    try:
        replace_file(path, state.to_json().encode("utf-8"))
    except OSError as exc:
        raise local_error(exc, path) from None


def read_progress(part: Path, state_file: Path) -> tuple[int, int | None] | None:
    """(bytes on disk, size) of an in-flight download, or None when there is none."""
    state = load_state(state_file)
    if state is None or not part.exists():
        return None
    return RangeSet(state.done).total(), state.size


# ---------------------------------------------------------------------------
# internals


class _Restart(Exception):
    """The remote changed or ignores Range: start the file over."""

    def __init__(self, reason: str, *, ranges: bool = True) -> None:
        super().__init__(reason)
        self.ranges = ranges


class _SourceBad(Exception):
    """This source disagrees with the others (size, validator): drop it."""


@dataclass
class _Source:
    url: str
    effective_url: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    failures: int = 0
    dropped: str | None = None  # reason, once dropped
    served: RangeSet = field(default_factory=RangeSet)

    def validator_headers(self) -> dict[str, str]:
        value = self.etag if self.etag and not self.etag.startswith("W/") else self.last_modified
        return {"If-Range": value} if value else {}


@dataclass
class _Segment:
    start: int
    pos: int
    end: int | None  # None: until the end of an unknown-size body
    owner: int | None = None
    reading_to: int = 0  # the owner's read in flight may fill bytes up to here: never split below


class _Transfer:
    """Shared state of one running transfer; workers are threads."""

    def __init__(self, *, urls, part, state_file, algorithm, options, on_event, stop, client_factory, name):
        self.urls = list(urls)
        self.part = part
        self.state_file = state_file
        self.algorithm = algorithm
        self.opt: TransferOptions = options
        self.emit: EventSink = on_event
        self.stop = stop
        self.client_factory = client_factory
        self.name = name
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.sources = [_Source(u) for u in self.urls]
        self.size: int | None = None
        self.ranges_ok = True
        self.done = RangeSet()
        self.segments: list[_Segment] = []
        self.fd: int | None = None
        self.fatal: BaseException | None = None
        self.restart: _Restart | None = None
        self.failures_in_a_row = 0
        self.downloaded = 0
        self.reused = 0
        self.restarts = 0
        self.max_workers_seen = 0
        self.active_workers = 0
        self.generation = 0
        self.dropped: list[str] = []
        self.hasher = None
        self.hashed = 0
        self.hash_lock = threading.Lock()
        self.dirty = False
        self.interrupt = threading.Event()  # wakes sleeping workers when a generation ends
        self.responses: dict[int, object] = {}  # worker -> open response, to abort on stop
        self.answered: set[int] = set()  # running workers that have had an answer (the ramp waits for them)
        self.worker_limit: int | None = None  # workers beyond this exit (the server asked for fewer)
        self.latency: float | None = None  # seconds from a request to its answer (moving average)
        self.conn_rate = 0.0  # bytes/s per running connection, lately
        self.crowded_at: int | None = None  # workers that had answers when the server refused one more
        self.refusals = 0  # 429/503 answers while other connections delivered
        self.worker_source: dict[int, _Source] = {}  # the source each worker's last request went to

    # -- setup -------------------------------------------------------------
    def open(self) -> None:
        state = load_state(self.state_file)
        usable = False
        if state is not None and state.size is not None and self.part.exists():
            done = RangeSet(state.done)
            on_disk = self.part.stat().st_size
            usable = (
                any(u in state.urls for u in self.urls)
                and (state.ranges or done.covers(state.size))
                and all(b <= on_disk for _, b in done.as_list())
            )
        if state is not None and not usable and state.done:
            self._note("saved state does not fit this download; starting over")
        try:
            self.fd = os.open(self.part, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise local_error(exc, self.part) from None
        if usable:
            self.size = state.size
            self.ranges_ok = state.ranges
            self.done = RangeSet(state.done)
            for src in self.sources:
                vals = state.validators.get(src.url, {})
                src.etag, src.last_modified = vals.get("etag"), vals.get("last_modified")
            self.reused = self.done.total()
            if self.reused:
                self._note(f"resuming: {mib(self.reused)} of {mib(self.size)} already on disk")
        else:
            self._truncate()
        self._reset_hash()

    def _truncate(self) -> None:
        try:
            os.ftruncate(self.fd, 0)
        except OSError as exc:
            raise local_error(exc, self.part) from None
        self.size = None
        self.done = RangeSet()
        self.reused = 0  # bytes from an earlier run are gone: report what this run really reused
        for src in self.sources:
            src.etag = src.last_modified = None
            src.served = RangeSet()
        self.dirty = True

    def _reset_hash(self) -> None:
        self.hasher = new_hasher(self.algorithm) if self.algorithm else None
        self.hashed = 0

    def _plan_segments(self) -> None:
        """Pending segments for every gap (or one open-ended probe when size is unknown)."""
        if self.size is None:
            self.segments = [_Segment(0, 0, None)]
        else:
            self.segments = [_Segment(a, a, b) for a, b in self.done.missing(self.size)]

    # -- scheduling --------------------------------------------------------
    def take_segment(self, worker: int) -> _Segment | None:
        """Give ``worker`` a pending segment, or split the largest active one."""
        with self.lock:
            if self._finished_locked() or self.fatal or self.restart:
                return None
            pending = [s for s in self.segments if s.owner is None and (s.end is None or s.pos < s.end)]
            if pending:
                seg = max(pending, key=lambda s: (s.end or 1 << 62) - s.pos)
                seg.owner = worker
                return seg
            if self.size is None or not self.ranges_ok:
                return None
            active = [s for s in self.segments if s.owner is not None and s.end is not None]
            if not active:
                return None
            victim = max(active, key=lambda s: s.end - s.pos)
            if self.hasher is not None:
                # Hashing needs a contiguous prefix: prefer splitting the lowest segment
                # while it is not much smaller than the largest, so the prefix (and the
                # hash) keep up with the download instead of waiting for the end.
                lowest = min(active, key=lambda s: s.pos)
                if 2 * (lowest.end - lowest.pos) >= victim.end - victim.pos:
                    victim = lowest
            mid = self._split_point(victim)
            if mid is None:
                return None
            seg = _Segment(mid, mid, victim.end, owner=worker)
            victim.end = mid
            self.segments.append(seg)
            return seg

    def release(self, seg: _Segment) -> None:
        with self.lock:
            seg.owner = None
            self._prune_locked()

    def _prune_locked(self) -> None:
        self.segments = [s for s in self.segments if s.end is None or s.pos < s.end or s.owner is not None]

    def _finished_locked(self) -> bool:
        return self.size is not None and self.done.covers(self.size)

    def splittable_work(self) -> bool:
        with self.lock:
            if self.size is None or not self.ranges_ok:
                return False
            if any(s.owner is None and s.end is not None and s.pos < s.end for s in self.segments):
                return True
            return any(s.owner is not None and s.end is not None and self._split_point(s) is not None for s in self.segments)

    def _split_point(self, seg: _Segment) -> int | None:
        """Where an active segment may be split, or None (take_segment and splittable_work agree).

        A split pays when the half it takes away would take the owner longer than a new
        request costs: pieces are at least ``min_split`` and at least what one connection
        moves in one request latency (on a 200 ms route at 2 MiB/s per connection that is
        400 KiB; on loopback the floor decides).
        """
        smallest = max(self.opt.min_split, int(self.conn_rate * (self.latency or 0.0)))
        remaining = seg.end - seg.pos
        if remaining < 2 * smallest:
            return None
        # The owner's read in flight may fill bytes up to reading_to: split beyond that.
        mid = max(seg.pos + remaining // 2, seg.reading_to)
        if seg.end - mid < smallest:
            return None
        return mid

    def choose_source(self, worker: int) -> _Source | None:
        with self.lock:
            live = [s for s in self.sources if not s.dropped]
            if not live:
                return None
            return live[worker % len(live)]

    # -- one request -------------------------------------------------------
    def fetch_segment(self, worker: int, seg: _Segment, src: _Source, client, buffer: memoryview) -> None:
        """Download ``seg`` from ``src`` until it is done, cut short, or fails."""
        headers: dict[str, str] = dict(self.opt.headers)
        with self.lock:
            start = seg.pos
            known_size = self.size
            ranged = self.ranges_ok
        if ranged:
            last = "" if seg.end is None else str(seg.end - 1)
            headers["Range"] = f"bytes={start}-{last}"
            if start > 0 or src.etag or src.last_modified:
                headers.update(src.validator_headers())
        url = src.effective_url or src.url
        asked = time.monotonic()
        resp, final_url = open_url(client, url, headers=headers, timeouts=self.opt.timeouts)
        latency = time.monotonic() - asked
        with self.lock:
            self.responses[worker] = resp
            self.answered.add(worker)
            self.worker_source[worker] = src
            # What a new request costs (a connection, the round trips to the first byte):
            # the ramp judges over several of these, and a split must save more than one.
            self.latency = latency if self.latency is None else 0.7 * self.latency + 0.3 * latency
        try:
            src.effective_url = final_url
            body_start, body_end, total = self._check_response(resp, start, known_size, src, ranged)
            with self.lock:
                if self.size is None:
                    self.size = total
                    if total is not None:
                        seg.end = total if seg.end is None else min(seg.end, total)
                        self._preallocate_locked()
                    self.dirty = True
                if body_end is not None and seg.end is not None and body_end < seg.end:
                    # The server sent a shorter range than asked: leave the rest to others.
                    tail = _Segment(body_end, body_end, seg.end)
                    seg.end = body_end
                    self.segments.append(tail)
            self._stream_body(resp, seg, src, body_start, buffer)
        finally:
            with self.lock:
                self.responses.pop(worker, None)
            resp.close()

    def _check_response(self, resp, start, known_size, src: _Source, ranged):
        status = resp.status
        encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
        etag = resp.headers.get("ETag")
        last_modified = resp.headers.get("Last-Modified")
        if status == 416:
            match = _UNSATISFIED_RANGE.match(resp.headers.get("Content-Range", ""))
            total = int(match.group(1)) if match else None
            if total == 0 and start == 0:
                return 0, 0, 0
            if total is not None and known_size is not None and total != known_size:
                raise _Restart(f"{host_of(src.url)}: file size changed from {known_size} to {total}")
            raise TransientHTTPError(f"{host_of(src.url)} answered 416 for bytes {start}-")
        if encoding not in ("identity", ""):
            raise TransientHTTPError(f"{host_of(src.url)} sent a {encoding}-encoded body; asked for the raw bytes")
        if status == 206:
            match = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
            if not match:
                raise TransientHTTPError(f"{host_of(src.url)}: 206 without a usable Content-Range")
            first, last, total_text = int(match.group(1)), int(match.group(2)), match.group(3)
            total = None if total_text == "*" else int(total_text)
            if first != start or last < first:
                raise TransientHTTPError(
                    f"{host_of(src.url)}: Content-Range {first}-{last} does not match the request for {start}-"
                )
            if total is None:
                raise TransientHTTPError(f"{host_of(src.url)}: Content-Range gives no total size")
            if known_size is not None and total != known_size:
                self._size_mismatch(src, known_size, total)
            self._check_validator(src, etag, last_modified)
            return first, last + 1, total
        if status == 200:
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            changed = self._validator_differs(src, etag, last_modified)
            resized = known_size is not None and total is not None and total != known_size
            if changed or resized:
                with self.lock:
                    others = [s for s in self.sources if s is not src and not s.dropped]
                if others:
                    # One source of several changed its file: drop it (and what it gave us)
                    # instead of starting over with it still in the mix.
                    what = f"size {known_size} -> {total}" if resized else f"ETag {src.etag} -> {etag}"
                    raise _SourceBad(f"{host_of(src.url)} changed its file ({what})")
            if start > 0 or resized:
                if changed or resized:
                    raise _Restart(f"{host_of(src.url)}: the remote file changed; restarting from 0")
                raise _Restart(f"{host_of(src.url)} ignored Range; restarting from 0 on one connection", ranges=False)
            if changed:
                raise _Restart(f"{host_of(src.url)}: the remote file changed; restarting from 0")
            if ranged and self.size is None:
                # Answered a Range probe with the whole body: no range support.
                with self.lock:
                    self.ranges_ok = False
                    self.dirty = True
            self._check_validator(src, etag, last_modified)
            return 0, total, total
        raise TransientHTTPError(f"{host_of(src.url)} answered HTTP {status}")

    def _size_mismatch(self, src: _Source, known: int, got: int) -> None:
        with self.lock:
            others = [s for s in self.sources if s is not src and not s.dropped]
        if others:
            raise _SourceBad(f"{host_of(src.url)} has a different size ({got} bytes, expected {known})")
        raise _Restart(f"{host_of(src.url)}: file size changed from {known} to {got}; restarting from 0")

    def _validator_differs(self, src: _Source, etag, last_modified) -> bool:
        if src.etag and etag:
            return src.etag != etag
        if src.last_modified and last_modified:
            return src.last_modified != last_modified
        return False

    def _check_validator(self, src: _Source, etag, last_modified) -> None:
        if self._validator_differs(src, etag, last_modified):
            with self.lock:
                others = [s for s in self.sources if s is not src and not s.dropped]
            if others and self.done.total():
                raise _SourceBad(f"{host_of(src.url)} changed its file (ETag {src.etag} -> {etag})")
            raise _Restart(f"{host_of(src.url)}: the remote file changed (ETag {src.etag} -> {etag}); restarting from 0")
        with self.lock:
            if etag and not src.etag:
                src.etag = etag
                self.dirty = True
            if last_modified and not src.last_modified:
                src.last_modified = last_modified
                self.dirty = True

    def _stream_body(self, resp, seg: _Segment, src: _Source, pos: int, buffer: memoryview) -> None:
        window: deque[tuple[float, int]] = deque()
        window_bytes = 0
        generation = self.generation
        opened = time.monotonic()
        last = _FIRST_READ
        while True:
            if self.stop.is_set() or self.generation != generation or self.fatal or self.restart or src.dropped:
                return
            # Ask for about twice what the last read brought (up to the buffer): reads stay
            # large on a fast link, and on a slow one the bytes in flight, which a work
            # stealer must leave alone, stay few.
            want = min(len(buffer), max(_FIRST_READ, 2 * last))
            with self.lock:
                end = seg.end
                if end is not None:
                    if pos >= end:
                        return
                    want = min(want, end - pos)
                seg.reading_to = pos + want
            try:
                n = resp.readinto(buffer[:want])
            except Exception as exc:  # http.client / socket errors while streaming
                if _is_timeout(exc):
                    raise TransientHTTPError(f"{host_of(src.url)}: read timed out (no data for {self.opt.timeouts.read:g}s)") from None
                raise TransientHTTPError(f"{host_of(src.url)}: connection broke after byte {pos}: {describe_error(exc)}") from None
            if not n:
                if end is None:
                    with self.lock:
                        if self.size is None:
                            self.size = pos
                            self.dirty = True
                        seg.end = pos
                    return
                raise TransientHTTPError(f"{host_of(src.url)}: connection closed at byte {pos} of {end}")
            data = buffer[:n]
            last = n
            if self.opt.limiter is not None:
                self.opt.limiter.wait(n)
            try:
                os.pwrite(self.fd, data, pos)
            except OSError as exc:
                raise local_error(exc, self.part, needed=self._remaining()) from None
            with self.lock:
                if src.dropped or self.generation != generation:
                    return  # bytes of a dropped source or an old generation are not trusted
                self.done.add(pos, pos + n)
                src.served.add(pos, pos + n)
                seg.pos = pos + n
                self.downloaded += n
                self.failures_in_a_row = 0
                src.failures = 0
                self.dirty = True
                self.wake.notify_all()
            pos += n
            now = time.monotonic()
            window.append((now, n))
            window_bytes += n
            while window and now - window[0][0] > self.opt.stall_window:
                window_bytes -= window.popleft()[1]
            if now - opened > self.opt.stall_window and window_bytes < self.opt.stall_min_rate * self.opt.stall_window:
                raise TransientHTTPError(
                    f"{host_of(src.url)}: stalled below {self.opt.stall_min_rate:g} B/s for {self.opt.stall_window:g}s; reconnecting"
                )

    def _remaining(self) -> int | None:
        if self.size is None:
            return None
        return self.size - self.done.total()

    def _preallocate_locked(self) -> None:
        if not self.opt.preallocate or not self.size or not hasattr(os, "posix_fallocate"):
            return
        try:
            os.posix_fallocate(self.fd, 0, self.size)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise local_error(exc, self.part, needed=self._remaining()) from None
            # EOPNOTSUPP / EINVAL on some filesystems: preallocation is only an optimisation.

    # -- workers -----------------------------------------------------------
    def worker(self, worker_id: int) -> None:
        client = self.client_factory(timeouts=self.opt.timeouts)
        buffer = memoryview(bytearray(self.opt.chunk_size))
        try:
            self._work(worker_id, client, buffer)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            with self.lock:
                if self.fatal is None:
                    self.fatal = exc
                self.wake.notify_all()
        finally:
            client.close()
            with self.lock:
                self.answered.discard(worker_id)
                self.active_workers -= 1
                self.wake.notify_all()

    def _work(self, worker_id: int, client, buffer: memoryview) -> None:
        while not self.stop.is_set():
            with self.lock:
                if self.worker_limit is not None and self.active_workers > self.worker_limit:
                    return  # the server refused more connections: this one steps back
            seg = self.take_segment(worker_id)
            if seg is None:
                return
            src = self.choose_source(worker_id)
            if src is None:
                self.release(seg)
                with self.lock:
                    if self.fatal is None:
                        self.fatal = NetworkError(f"every source failed for {self.name}")
                return
            try:
                self.fetch_segment(worker_id, seg, src, client, buffer)
                self.release(seg)
            except _Restart as exc:
                self.release(seg)
                with self.lock:
                    if self.restart is None:
                        self.restart = exc
                    self.wake.notify_all()
                return
            except _SourceBad as exc:
                self.release(seg)
                self._drop_source(src, str(exc), distrust=True)
            except TransientHTTPError as exc:
                self.release(seg)
                if exc.status in _CROWDED and self._crowded(worker_id, src, exc.status):
                    continue  # fewer connections from now on; others still deliver, so no backoff here
                self._retry_later(src, str(exc), exc.retry_after)
            except NetworkError as exc:
                self.release(seg)
                status = getattr(exc, "status", None)
                if status == 403 and self._crowded(worker_id, src, status, at_once=True):
                    continue  # other connections to it work: this one was refused, not the file
                if not self._drop_source(src, str(exc), distrust=False):
                    raise

    def _crowded(self, worker_id: int, src: _Source, status: int, *, at_once: bool = False) -> bool:
        """The server refused a request (429/503, or 403) while other connections to it deliver.

        The second 429/503 (or the first 403, which is never worth retrying) is taken as a
        per-client connection cap (many mirrors have one), not a hiccup or a forbidden
        file: keep as many connections as had answers, for the rest of this transfer.
        Returns False for a first 429/503 and when no other connection to this source
        delivers (an outage, or really forbidden): those take the usual path.
        """
        with self.lock:
            others = len([w for w in self.answered - {worker_id} if self.worker_source.get(w) is src])
            if not others:
                return False
            self.refusals += 1
            if self.refusals < 2 and not at_once:
                return False
            # Sources take workers in turn: the cap of this one bounds each source's share.
            limit = others * len([s for s in self.sources if not s.dropped])
            first = self.crowded_at is None
            self.crowded_at = limit if first else min(self.crowded_at, limit)
            self.worker_limit = min(self.worker_limit or limit, limit)
        if first:
            self._note(f"{host_of(src.url)} answered HTTP {status} to connection {others + 1}; "
                       f"staying at {others} connection{'s' if others != 1 else ''}")
        return True

    def _retry_later(self, src: _Source, message: str, retry_after: float | None) -> None:
        if self.stop.is_set() or self.interrupt.is_set():
            return  # we are shutting down: the broken read is ours, not the network's
        with self.lock:
            self.failures_in_a_row += 1
            src.failures += 1
            attempts = self.failures_in_a_row
            others = [s for s in self.sources if s is not src and not s.dropped]
        if others and src.failures >= self.opt.source_failures:
            self._drop_source(src, f"{message} ({src.failures} failures in a row)", distrust=False)
            return
        if attempts > self.opt.max_attempts:
            raise NetworkError(
                f"{self.name}: gave up after {attempts - 1} retries without progress; last error: {message}. "
                f"Run the same command again to resume"
            )
        delay = min(self.opt.backoff_cap, self.opt.backoff_base * (2 ** (attempts - 1)))
        delay *= 0.75 + random.random() * 0.5
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.opt.retry_after_cap))
        self._note(f"{message}; retry {attempts}/{self.opt.max_attempts} in {delay:.1f}s")
        self.interrupt.wait(delay)

    def _drop_source(self, src: _Source, reason: str, *, distrust: bool) -> bool:
        """Drop ``src`` if another source remains; un-mark what it served when ``distrust``."""
        with self.lock:
            others = [s for s in self.sources if s is not src and not s.dropped]
            if not others:
                return False
            src.dropped = reason
            self.dropped.append(src.url)
            if distrust:
                # It disagreed with the others: bytes it already gave us are suspect.
                for lo, hi in src.served.as_list():
                    self._unmark_locked(lo, hi)
            self.dirty = True
        self._note(f"dropped source {src.url}: {reason}")
        return True

    def _unmark_locked(self, lo: int, hi: int) -> None:
        """Forget bytes ``[lo, hi)``: they go back to the work to do (and the hash restarts)."""
        self.done.remove(lo, hi)
        if lo < self.hashed:
            self._reset_hash()
        self.segments.append(_Segment(lo, lo, hi))
        self._prune_locked()

    # -- hashing -----------------------------------------------------------
    def hash_ready_prefix(self) -> None:
        """Hash newly contiguous bytes from the start of the file (from the page cache)."""
        if self.hasher is None:
            return
        with self.hash_lock:
            with self.lock:
                end = self.done.prefix_end()
                start, hasher = self.hashed, self.hasher
            if end > start:
                update_from_file(hasher, self.part, start, end)
                with self.lock:
                    if self.hasher is hasher:
                        self.hashed = end

    # -- the main loop -----------------------------------------------------
    def run(self) -> TransferResult:
        started = time.monotonic()
        self.open()
        self.emit(Event(EventKind.START, self.name, done=self.done.total(), total=self.size))
        hasher_stop = threading.Event()
        hasher = threading.Thread(target=self._hash_loop, args=(hasher_stop,), daemon=True)
        if self.algorithm:
            hasher.start()
        try:
            while True:
                self._plan_segments()
                try:
                    self._run_generation(started)
                    break
                except _Restart as exc:
                    self.restarts += 1
                    if self.restarts > self.opt.max_restarts:
                        raise RemoteChangedError(
                            f"{self.name}: the remote file kept changing ({self.restarts} restarts): {exc}. "
                            f"Try again later or use another mirror"
                        ) from None
                    self._note(str(exc))
                    with self.lock:
                        self._truncate()
                        self.ranges_ok = exc.ranges
                        self._reset_hash()
                        self.restart = None
                        self.generation += 1
            self.hash_ready_prefix()
        finally:
            hasher_stop.set()
            with self.lock:
                self.wake.notify_all()  # the hash loop sleeps on it: wake it to see the stop
            if hasher.is_alive():
                hasher.join()
            with self.lock:
                self.dirty = True
            self._save_state(force=True)
            if self.fd is not None:
                os.close(self.fd)
        digest = None
        if self.hasher is not None:
            self.hash_ready_prefix_final()
            digest = self.hasher.hexdigest()
        return TransferResult(
            size=self.size or 0,
            digest=digest,
            algorithm=self.algorithm,
            downloaded=self.downloaded,
            reused=self.reused,
            elapsed=time.monotonic() - started,
            connections=self.max_workers_seen,
            restarts=self.restarts,
            sources_dropped=list(self.dropped),
        )

    def hash_ready_prefix_final(self) -> None:
        with self.hash_lock:
            if self.hashed < (self.size or 0):
                update_from_file(self.hasher, self.part, self.hashed, self.size)
                self.hashed = self.size or 0

    def _hash_loop(self, stop: threading.Event) -> None:
        while not stop.is_set():
            with self.lock:
                self.wake.wait(0.2)
            try:
                self.hash_ready_prefix()
            except OSError:
                pass  # the main thread reports file errors

    def _run_generation(self, started: float) -> None:
        threads: list[threading.Thread] = []
        next_id = 0
        fixed = self.opt.connections
        ramp = _Ramp(self.opt) if fixed is None else None
        last_state = last_progress = time.monotonic()
        rate = _RateMeter()
        rate.update(time.monotonic(), self.done.total())
        recent = _RateMeter(window=1.0)  # for the per-connection rate that sizes splits
        try:
            while True:
                with self.lock:
                    if self.fatal:
                        raise self.fatal
                    if self.restart:
                        raise self.restart
                    finished = self._finished_locked()
                    alive = self.active_workers
                    answered = len(self.answered)
                if finished:
                    return
                if self.stop.is_set():
                    raise InterruptedTransferError(
                        f"{self.name}: stopped at {mib(self.done.total())}; run the same command again to resume"
                    )
                now = time.monotonic()
                self.conn_rate = recent.update(now, self.downloaded) / max(1, alive)
                segmented = self.size is not None and self.ranges_ok
                if not segmented:
                    target = 1  # a probe first; no Range support: one connection
                elif ramp is None:
                    target = fixed
                else:
                    target = ramp.update(now, self.downloaded, alive=alive, answered=answered,
                                         latency=self.latency or 0.0)
                with self.lock:
                    if self.crowded_at is not None:
                        target = min(target, self.crowded_at)
                        if ramp is not None:
                            ramp.done = True
                    self.worker_limit = target
                want = target
                # At most want - alive new workers per pass: a worker that exits at once
                # (restart, fatal error, stop, nothing to split) must not make this spin.
                for _ in range(max(0, want - alive)):
                    if alive and not self.splittable_work():
                        break
                    thread = threading.Thread(target=self.worker, args=(next_id,), daemon=True)
                    with self.lock:
                        self.active_workers += 1
                        alive = self.active_workers
                        self.max_workers_seen = max(self.max_workers_seen, alive)
                    next_id += 1
                    threads.append(thread)
                    thread.start()
                if now - last_state >= self.opt.state_interval:
                    self._save_state()
                    last_state = now
                if now - last_progress >= self.opt.progress_interval:
                    done = self.done.total()
                    self.emit(
                        Event(
                            EventKind.PROGRESS,
                            self.name,
                            done=done,
                            total=self.size,
                            rate=rate.update(now, done),
                            connections=alive,
                            elapsed=now - started,
                        )
                    )
                    last_progress = now
                with self.lock:
                    if not (self.fatal or self.restart or self._finished_locked()):
                        self.wake.wait(0.05)
        finally:
            self.stop_generation()
            for thread in threads:
                thread.join()
            self.interrupt = threading.Event()

    def stop_generation(self) -> None:
        """End this generation: wake sleeping workers and unblock their reads."""
        with self.lock:
            self.generation += 1
            self.interrupt.set()
            responses = list(self.responses.values())
            self.wake.notify_all()
        for resp in responses:
            resp.abort()

    def _save_state(self, *, force: bool = False) -> None:
        with self.lock:
            if not (self.dirty or force):
                return
            state = TransferState(
                urls=self.urls,
                size=self.size,
                ranges=self.ranges_ok,
                validators={
                    s.url: {k: v for k, v in (("etag", s.etag), ("last_modified", s.last_modified)) if v}
                    for s in self.sources
                },
                done=self.done.as_list(),
                algorithm=self.algorithm,
            )
            self.dirty = False
        save_state(self.state_file, state)

    def _note(self, message: str) -> None:
        self.emit(Event(EventKind.NOTE, self.name, done=self.done.total(), total=self.size, message=message))


class _Ramp:
    """How many connections a file gets when ``--connections`` is not given.

    Start at ``initial_connections`` and double, up to ``max_connections``, while the
    added connections pay: a step is judged only once every running worker has had
    an answer (on a 200 ms route a new connection needs a few round trips before it
    delivers anything), then over ``ramp_interval`` seconds; when that window's rate
    beats the previous step's by ``ramp_gain`` it doubles again, otherwise it stays
    where it is. Per-connection throttling (most CDNs, long fat routes) rewards every
    connection and the ramp runs to the cap; on a link that one connection already
    fills it stops at the first step.
    """

    def __init__(self, opt: "TransferOptions") -> None:
        self.opt = opt
        self.target = min(opt.initial_connections, opt.max_connections)
        self.done = self.target >= opt.max_connections
        self.step_started: float | None = None
        self.window: tuple[float, int] | None = None  # (start, bytes downloaded then)
        self.last_rate: float | None = None

    def update(self, now: float, downloaded: int, *, alive: int, answered: int, latency: float) -> int:
        if self.done:
            return self.target
        if self.step_started is None:
            self.step_started = now
        if self.window is None:
            settled = alive >= self.target and answered >= alive
            if settled or now - self.step_started > 20 * max(self.opt.ramp_interval, latency):
                self.window = (now, downloaded)
            return self.target
        start, base = self.window
        if now - start < max(self.opt.ramp_interval, 4 * latency):  # several round trips
            return self.target
        rate = (downloaded - base) / (now - start)
        if alive < self.target or (self.last_rate is not None and rate < self.last_rate * self.opt.ramp_gain):
            self.done = True  # not enough work left to split, or the last step did not pay
            return self.target
        self.last_rate = rate
        self.target = min(self.opt.max_connections, self.target * 2)
        self.done = self.target >= self.opt.max_connections
        self.step_started, self.window = now, None
        return self.target


class _RateMeter:
    """Smoothed rate over a sliding window of a few seconds."""

    def __init__(self, window: float = 3.0) -> None:
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def update(self, now: float, done: int) -> float:
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window:
            self.samples.popleft()
        t0, d0 = self.samples[0]
        return (done - d0) / (now - t0) if now > t0 else 0.0


def download_to_part(
    *,
    urls: list[str],
    part: Path,
    state_file: Path,
    algorithm: str | None = None,
    options: TransferOptions | None = None,
    on_event: EventSink = ignore_event,
    stop: threading.Event | None = None,
    client_factory: Callable = Client,
    name: str | None = None,
) -> TransferResult:
    """Download ``urls`` (sources of the same file) into ``part``, resuming from ``state_file``.

    Args:
        urls: the origin and/or mirrors of one file, preferred first.
        algorithm: hash to compute while downloading ("sha256", "md5") or None.
        stop: set it to stop cleanly; the state is saved and
            InterruptedTransferError raised.
    Returns:
        TransferResult with the digest of the complete ``part``.
    Raises:
        NetworkError, RemoteChangedError, LocalFileError, DiskFullError,
        InterruptedTransferError.
    """
    transfer = _Transfer(
        urls=urls,
        part=Path(part),
        state_file=Path(state_file),
        algorithm=algorithm,
        options=options or TransferOptions(),
        on_event=on_event,
        stop=stop or threading.Event(),
        client_factory=client_factory,
        name=name or Path(part).name.removesuffix(".part"),
    )
    try:
        return transfer.run()
    except KeyboardInterrupt:
        raise InterruptedTransferError(
            f"{transfer.name}: interrupted; run the same command again to resume"
        ) from None


# ---------------------------------------------------------------------------
# helpers


def _is_timeout(exc: BaseException) -> bool:
    import socket

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (socket.timeout, TimeoutError)) or "timed out" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__
    return False
