"""Before bytes from an earlier run are trusted without a hash: sample them against the origin.

An ETag or Last-Modified date says the origin still has the same file, but some servers
keep the validator while the bytes change (a regenerated file with the same mtime, a
pool of servers behind one name), and a ``.part`` can hold zeros where its state file
says bytes are (a reset VM, a file system that lost writes). With no expected hash
nothing else would notice, so a resumed download first asks the origin again for a few
windows of bytes that are already on disk (the file's start, the middle, the end of
what is done) and compares them. Any difference, a new size or a changed validator
means the file starts over from byte 0; when the origin cannot be asked, the run ends
(the partial is kept) rather than resume on weak evidence.
"""

from __future__ import annotations

import os
import re
import time

from prefetch.errors import NetworkError
from prefetch.net.failures import TransientHTTPError
from prefetch.net.http import open_url
from prefetch.net.urls import host_of

WINDOW = 16 << 10  # bytes per sampled window
_ATTEMPTS = 3
_IGNORED = "ignored Range"
_CONTENT_RANGE = r"^\s*bytes\s+(\d+)-(\d+)/(\d+)\s*$"  # compiled on first use (re's cache): only a resume reads it


def sample_windows(done: list[tuple[int, int]], *, width: int = WINDOW) -> list[tuple[int, int]]:
    """Up to three ``(start, end)`` windows inside the done ranges: the first, a middle and the last bytes."""
    spans = [(a, b) for a, b in sorted(done) if b > a]
    if not spans:
        return []
    first_a, first_b = spans[0]
    last_a, last_b = spans[-1]
    windows = [(first_a, min(first_b, first_a + width)), (max(last_a, last_b - width), last_b)]
    middle_a, middle_b = max(spans, key=lambda s: s[1] - s[0])
    centre = (middle_a + middle_b) // 2
    windows.append((max(middle_a, centre - width // 2), min(middle_b, centre + width // 2)))
    unique: list[tuple[int, int]] = []
    for window in windows:
        if window not in unique and window[1] > window[0]:
            unique.append(window)
    return unique


def check_kept_bytes(transfer) -> None:
    """Start ``transfer`` over from byte 0 (with a log line) when its kept bytes differ from the origin's."""
    reason = kept_bytes_differ(transfer)
    if reason:
        transfer.note(f"{reason}; restarting from 0 (no expected hash would catch a stitched file)")
        transfer._truncate()


def kept_bytes_differ(transfer) -> str | None:
    """:func:`check_resumed_bytes` for a transfer (``engine.transfer._Transfer``) that just loaded its state."""
    client = transfer.client_factory(timeouts=transfer.opt.timeouts, resolve=transfer.opt.resolve)
    try:
        reason = check_resumed_bytes(fd=transfer.file.fd, done=transfer.done.as_list(), size=transfer.size,
                                   source=transfer.sources.all[0], client=client, headers=dict(transfer.opt.headers),
                                   timeouts=transfer.opt.timeouts)
    finally:
        client.close()
    if reason and _IGNORED in reason:
        transfer.ranges_ok = False  # the restart is one plain GET, as the engine's own "ignored Range" restart
    return reason


def check_resumed_bytes(*, fd: int, done: list[tuple[int, int]], size: int, source, client, headers: dict[str, str],
                        timeouts, backoff: float = 0.5) -> str | None:
    """Compare sampled windows of the ``.part`` (``fd``) with ``source``'s bytes.

    Returns:
        None when every window matches; else why the bytes on disk cannot be trusted.
    Raises:
        NetworkError: the origin could not be asked (after a few attempts).
    """
    host = host_of(source.url)
    for start, end in sample_windows(done):
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                reason = _compare_window(fd, start, end, size=size, source=source, client=client, headers=headers,
                                         timeouts=timeouts, host=host)
                break
            except TransientHTTPError as exc:
                if attempt == _ATTEMPTS:
                    raise NetworkError(f"{host}: could not check the bytes kept from an earlier run against the "
                                       f"origin ({exc}); the partial is kept: run the same command again") from None
                time.sleep(backoff * attempt)
        if reason:
            return reason
    return None


def _compare_window(fd, start, end, *, size, source, client, headers, timeouts, host) -> str | None:
    asked = dict(headers)
    asked["Range"] = f"bytes={start}-{end - 1}"
    asked.update(source.validator_headers())
    resp, _ = open_url(client, source.effective_url or source.url, headers=asked, timeouts=timeouts)
    try:
        etag, last_modified = resp.headers.get("ETag"), resp.headers.get("Last-Modified")
        if resp.status == 200:
            if source.differs(etag, last_modified) or not (etag or last_modified):
                return f"{host}: the remote file changed (the whole file came back to a check of the kept bytes)"
            return f"{host} {_IGNORED} when the kept bytes were checked"
        if resp.status == 416:
            unsatisfied = re.match(r"^\s*bytes\s+\*/(\d+)\s*$", resp.headers.get("Content-Range", ""), re.I)
            if unsatisfied and int(unsatisfied.group(1)) != size:
                return f"{host}: file size changed from {size} to {unsatisfied.group(1)}"
        if resp.status != 206:
            return f"{host} answered HTTP {resp.status} to a check of the bytes kept from an earlier run"
        match = re.match(_CONTENT_RANGE, resp.headers.get("Content-Range", ""), re.I)
        if not match or int(match.group(1)) != start or int(match.group(2)) != end - 1:
            return f"{host} answered another range than asked when checking the bytes kept from an earlier run"
        if int(match.group(3)) != size:
            return f"{host}: file size changed from {size} to {match.group(3)}"
        if source.differs(etag, last_modified):
            return f"{host}: the remote file changed (its validator differs)"
        try:
            theirs = resp.read(end - start)
        except Exception as exc:  # noqa: BLE001 - http.client / socket errors while reading
            raise TransientHTTPError(f"{host}: {exc}", cause=str(exc)) from None
        if len(theirs) != end - start:
            raise TransientHTTPError(f"{host}: the check's answer ended early", cause="short read")
        ours = os.pread(fd, end - start, start)
        if ours != theirs:
            offset = start + next((i for i, (x, y) in enumerate(zip(ours, theirs)) if x != y), 0)
            return (f"the bytes kept from an earlier run differ from {host}'s at offset {offset} although its "
                    f"ETag/Last-Modified did not change")
        return None
    finally:
        resp.close()
