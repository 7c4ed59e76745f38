"""The sources of one file (the origin and its mirrors): validators, health, drop and distrust.

A source is dropped when it keeps failing while others remain, or when it
disagrees with the others (size, validator); a source dropped for disagreeing is
*distrusted*: the bytes it already gave go back to the work to do. A source much
slower per connection than the fastest is *demoted*: no new requests go to it
while a faster one delivers (it is used again if the faster ones fail).
"""

from __future__ import annotations

from collections import deque
from dataclasses import field

from prefetch.engine.ranges import RangeSet
from prefetch.model.lean import dataclass


class Restart(Exception):
    """The remote changed or ignores Range: start the file over."""

    def __init__(self, reason: str, *, ranges: bool = True) -> None:
        super().__init__(reason)
        self.ranges = ranges


class SourceBad(Exception):
    """This source disagrees with the others (size, validator): drop it."""


LINK_GONE = (401, 403, 404, 410)  # what a signed link past its expiry answers (S3: 403 AccessDenied)


@dataclass
class Source:
    """One URL of the file and what we know of it."""

    url: str
    effective_url: str | None = None  # after redirects
    etag: str | None = None
    last_modified: str | None = None
    failures: int = 0  # failures in a row
    bad_ranges: int = 0  # 206 answers for bytes nowhere near the asked range
    delivered: int = 0  # bytes it gave in this run (a source that never delivered is dropped sooner)
    demoted: str | None = None  # reason, while demoted
    samples: deque = field(default_factory=deque)  # (time, delivered, conn_seconds, connections)
    conn_seconds: float = 0.0  # seconds x connections it has had, for its rate per connection
    rate: float | None = None  # bytes/s per connection, lately
    dropped: str | None = None  # reason, once dropped
    revive_at: float | None = None  # monotonic time a source dropped as unreachable is tried again
    served: RangeSet = field(default_factory=RangeSet)  # bytes it gave us (to distrust on a drop)
    seen: set = field(default_factory=set)  # every (ETag, Last-Modified) it answered with (kept over restarts)
    replicas: bool = False  # its validators differ from one copy to the next (a pool of servers)

    def validator_headers(self) -> dict[str, str]:
        """``If-Range`` with the strong ETag, else Last-Modified, for a resumed request."""
        value = self.etag if self.etag and not self.etag.startswith("W/") and _sendable(self.etag) else self.last_modified
        return {"If-Range": value} if value and _sendable(value) else {}

    def validators(self) -> dict[str, str]:
        """What the state file records for this source."""
        return {k: v for k, v in (("etag", self.etag), ("last_modified", self.last_modified)) if v}

    def differs(self, etag: str | None, last_modified: str | None) -> bool:
        """An answer's validator contradicts the one we hold (a pool's copies too: whether that is
        a change is :meth:`replica_change`'s and the hash's to say)."""
        if self.etag and etag:
            return self.etag != etag
        if self.last_modified and last_modified:
            return self.last_modified != last_modified
        return False

    def replica_change(self, etag: str | None, last_modified: str | None) -> bool:
        """Whether validators that differ from ours were seen before from this source: a pool of
        servers whose copies answer the same file with their own (an ETag from an inode or an
        mtime, each copy's Last-Modified), not a changed file. It is then marked (``replicas``);
        a first change is taken as a change. (Without the hash each such answer still means one
        stream from 0: the mark never lets pieces of two copies through unchecked.)"""
        key = (etag, last_modified)
        if key in self.seen:
            self.replicas = True
            return True
        self.seen.add(key)
        return False

    def learn(self, etag: str | None, last_modified: str | None) -> bool:
        """Keep the first validators seen; True when something new was learnt."""
        if etag or last_modified:
            self.seen.add((etag, last_modified))
        changed = False
        if etag and not self.etag:
            self.etag, changed = etag, True
        if last_modified and not self.last_modified:
            self.last_modified, changed = last_modified, True
        return changed

    def link_expired(self, asked: str | None, status: int | None) -> bool:
        """Whether a refusal (401, 403, 404, 410) of ``asked`` is a link this source gave that
        expired: ``asked`` is where the source redirected before, not its own URL (a signed
        URL: GitHub release assets, S3 or OSS presigned, a hub's CDN, valid minutes). The link
        is forgotten, so the next request asks the source's URL for a new one. A new link
        refused at once was asked through the source's own URL: a real refusal, no loop."""
        if status not in LINK_GONE or not asked or asked == self.url:
            return False
        if self.effective_url == asked:
            self.effective_url = None
        return True

    def forget(self) -> None:
        """The file starts over: nothing this source said still holds."""
        self.etag = self.last_modified = None
        self.served = RangeSet()


class Sources:
    """The sources in preference order. Callers hold the transfer's lock."""

    def __init__(self, urls: list[str]) -> None:
        self.all = [Source(u) for u in urls]
        self.dropped: list[str] = []  # urls, in the order they were dropped
        self.pinned: Source | None = None  # the one source to use (a file that cannot be checked)

    def live(self) -> list[Source]:
        return [s for s in self.all if not s.dropped]

    def others(self, src: Source) -> list[Source]:
        """Live sources besides ``src``."""
        return [s for s in self.all if s is not src and not s.dropped]

    def revive(self, now: float) -> list[Source]:
        """Sources dropped as unreachable whose time has come: live again (a name that failed to
        resolve, a refused connection, may well work minutes later in a long run)."""
        back = [s for s in self.all if s.dropped and s.revive_at is not None and now >= s.revive_at]
        for src in back:
            src.dropped, src.revive_at, src.failures = None, None, 0
        return back

    def choose(self, worker: int) -> Source | None:
        """Workers take the live sources in turn (those not demoted, while any is left)."""
        import time

        self.revive(time.monotonic())
        live = self.live()
        if self.pinned is not None and not self.pinned.dropped:
            return self.pinned
        preferred = [s for s in live if not s.demoted] or live
        return preferred[worker % len(preferred)] if preferred else None

    def rates(self, now: float, connections: dict[int, int], window: float) -> dict[int, float]:
        """Bytes/s per connection of each live source: bytes over connection-seconds, lately.

        ``connections``: id(source) -> its connections with an answer now. A source is
        rated once it has had ``window / 2`` connection-seconds within the last
        ``window`` seconds; an idle source (its share done) keeps its last rating.
        """
        rates = {}
        for src in self.live():
            if src.samples:
                last_time = src.samples[-1][0]
                src.conn_seconds += (now - last_time) * src.samples[-1][3]
            src.samples.append((now, src.delivered, src.conn_seconds, connections.get(id(src), 0)))
            while len(src.samples) > 2 and now - src.samples[1][0] >= window:
                src.samples.popleft()
            _, d0, c0, _ = src.samples[0]
            if src.conn_seconds - c0 >= window / 2:
                src.rate = (src.delivered - d0) / (src.conn_seconds - c0)
            if src.rate is not None:
                rates[id(src)] = src.rate
        return rates

    def to_demote(self, rates: dict[int, float], ratio: float) -> tuple[Source, Source] | None:
        """(slow, fastest): a source delivering less than ``1/ratio`` of the fastest's rate per connection."""
        rated = [s for s in self.live() if not s.demoted and id(s) in rates]
        if len(rated) < 2:
            return None
        fastest = max(rated, key=lambda s: rates[id(s)])
        slowest = min(rated, key=lambda s: rates[id(s)])
        if rates[id(slowest)] * ratio < rates[id(fastest)]:
            return slowest, fastest
        return None

    def drop(self, src: Source, reason: str) -> bool:
        """Drop ``src`` if another source remains; False when it is the last."""
        if not self.others(src):
            return False
        src.dropped = reason
        self.dropped.append(src.url)
        if self.pinned is src:
            self.pinned = None
        if not [s for s in self.live() if not s.demoted]:
            for other in self.live():
                other.demoted = None  # the faster sources are gone: the slow ones are all there is
        return True

    def note_failure(self, src: Source, limit: int) -> bool:
        """Count a failure; True when ``src`` has failed ``limit`` times in a row and others remain."""
        src.failures += 1
        return bool(self.others(src)) and src.failures >= limit

    def validator_clash(self, src: Source, etag: str | None, last_modified: str | None) -> str | None:
        """Why ``src``'s answer cannot be mixed with another source's bytes when no hash is known, or None.

        Sizes alone do not make two files the same: without a hash, bytes are taken from
        several sources only when their validators agree (the same ETag, else the same
        Last-Modified); the first source whose validators were learnt keeps the file.
        """
        for other in self.all:
            if other is src or other.dropped or not (other.etag or other.last_modified):
                continue
            if etag and other.etag:
                same = etag == other.etag
            elif last_modified and other.last_modified:
                same = last_modified == other.last_modified
            else:
                same = False
            if not same:
                mine = etag or last_modified or "no validator"
                theirs = other.etag or other.last_modified
                return (f"{_host(src.url)} sends {mine} where {_host(other.url)} sends {theirs}: without an expected "
                        f"hash, bytes of two files that may differ are not mixed; using {_host(other.url)} only")
        return None

    def restore(self, validators: dict[str, dict[str, str]]) -> None:
        for src in self.all:
            vals = validators.get(src.url, {})
            src.etag, src.last_modified = vals.get("etag"), vals.get("last_modified")

    def forget(self) -> None:
        self.pinned = None
        for src in self.all:
            src.forget()


def _host(url: str) -> str:
    from prefetch.net.urls import host_of

    return host_of(url)


def _sendable(value: str) -> bool:
    """A validator that can go back out in a header: no line break or other control character (a
    hostile server's; http.client refuses to send one, and a resumed request would fail for good)."""
    return not any(ord(c) < 32 and c != "\t" for c in value)
