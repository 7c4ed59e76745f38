"""Is this answer the bytes we asked for? The checks on a response's status and headers.

A 206 is accepted only when its ``Content-Range`` starts where we asked and names
the size we know; a 200 to a resumed request means the server ignored Range or
the file changed (start over); a validator (ETag / Last-Modified) that differs
from the one we hold means the file changed: with other sources left, the source
that changed is dropped instead. Nothing here touches the transfer: the caller
applies the :class:`Answer`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from prefetch.http import TransientHTTPError, host_of
from prefetch.sources import Restart, Source, SourceBad

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.I)
_UNSATISFIED_RANGE = re.compile(r"^\s*bytes\s+\*/(\d+)\s*$", re.I)


@dataclass(frozen=True)
class Answer:
    """What an accepted response carries."""

    first: int  # offset of the body's first byte
    end: int | None  # offset after its last byte (None: until the connection closes)
    total: int | None  # the file's size, when the answer names it
    etag: str | None
    last_modified: str | None
    whole_body: bool = False  # a 200 to a Range probe: the server does not do ranges


def check_response(resp, *, start: int, known_size: int | None, src: Source, ranged: bool,
                   others: bool, have_bytes: bool) -> Answer:
    """Accept ``resp`` to a request for bytes ``start-``, or raise what to do instead.

    Args:
        others: other live sources remain (a disagreeing source is then dropped, not followed).
        have_bytes: some of the file is already on disk.
    Raises:
        TransientHTTPError: a wrong answer worth asking again (bad Content-Range, encoded body).
        Restart: the file changed or Range is ignored: start over (``ranges=False``: on one connection).
        SourceBad: this source disagrees with the others.
    """
    host = host_of(src.url)
    status = resp.status
    encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
    etag = resp.headers.get("ETag")
    last_modified = resp.headers.get("Last-Modified")
    if status == 416:
        match = _UNSATISFIED_RANGE.match(resp.headers.get("Content-Range", ""))
        total = int(match.group(1)) if match else None
        if total == 0 and start == 0:
            return Answer(0, 0, 0, etag, last_modified)
        if total is not None and known_size is not None and total != known_size:
            raise Restart(f"{host}: file size changed from {known_size} to {total}")
        raise TransientHTTPError(f"{host} answered 416 for bytes {start}-")
    if encoding not in ("identity", ""):
        raise TransientHTTPError(f"{host} sent a {encoding}-encoded body; asked for the raw bytes")
    if status == 206:
        match = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
        if not match:
            raise TransientHTTPError(f"{host}: 206 without a usable Content-Range")
        first, last, total_text = int(match.group(1)), int(match.group(2)), match.group(3)
        total = None if total_text == "*" else int(total_text)
        if first != start or last < first:
            raise TransientHTTPError(f"{host}: Content-Range {first}-{last} does not match the request for {start}-")
        if total is None:
            raise TransientHTTPError(f"{host}: Content-Range gives no total size")
        if known_size is not None and total != known_size:
            if others:
                raise SourceBad(f"{host} has a different size ({total} bytes, expected {known_size})")
            raise Restart(f"{host}: file size changed from {known_size} to {total}; restarting from 0")
        _check_validator(src, etag, last_modified, others=others, have_bytes=have_bytes)
        return Answer(first, last + 1, total, etag, last_modified)
    if status == 200:
        length = resp.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        changed = src.differs(etag, last_modified)
        resized = known_size is not None and total is not None and total != known_size
        if (changed or resized) and others:
            # One source of several changed its file: drop it (and what it gave us)
            # instead of starting over with it still in the mix.
            what = f"size {known_size} -> {total}" if resized else f"ETag {src.etag} -> {etag}"
            raise SourceBad(f"{host} changed its file ({what})")
        if start > 0 or resized:
            if changed or resized:
                raise Restart(f"{host}: the remote file changed; restarting from 0")
            raise Restart(f"{host} ignored Range; restarting from 0 on one connection", ranges=False)
        if changed:
            raise Restart(f"{host}: the remote file changed; restarting from 0")
        _check_validator(src, etag, last_modified, others=others, have_bytes=have_bytes)
        return Answer(0, total, total, etag, last_modified, whole_body=ranged)
    raise TransientHTTPError(f"{host} answered HTTP {status}")


def _check_validator(src: Source, etag: str | None, last_modified: str | None, *, others: bool,
                     have_bytes: bool) -> None:
    if not src.differs(etag, last_modified):
        return
    host = host_of(src.url)
    if others and have_bytes:
        raise SourceBad(f"{host} changed its file (ETag {src.etag} -> {etag})")
    raise Restart(f"{host}: the remote file changed (ETag {src.etag} -> {etag}); restarting from 0")
