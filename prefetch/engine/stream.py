"""One response's body into the ``.part`` file, and the file's hash as its prefix grows.

:func:`stream_body` reads into the worker's one reused buffer (a read returns
what has arrived), ``pwrite``s it at its offset and records it with the transfer;
it watches for stalls (too few bytes over a window) and stops as soon as the
transfer says so. :class:`PrefixHasher` hashes the contiguous prefix of the file
from the page cache while the download runs, so the digest is ready at the end.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque

from prefetch.net.failures import TransientHTTPError, describe_error
from prefetch.net.urls import host_of
from prefetch.fs.hashing import new_hasher, update_from_file

_FIRST_READ = 64 << 10


class StallWatch:
    """Raises when fewer than ``min_rate`` bytes/s arrived over the last ``window`` seconds."""

    def __init__(self, window: float, min_rate: float, host: str) -> None:
        self.window, self.min_rate, self.host = window, min_rate, host
        self.opened = time.monotonic()
        self.reads: deque[tuple[float, int]] = deque()
        self.bytes = 0

    def add(self, n: int) -> None:
        now = time.monotonic()
        self.reads.append((now, n))
        self.bytes += n
        while self.reads and now - self.reads[0][0] > self.window:
            self.bytes -= self.reads.popleft()[1]
        if now - self.opened > self.window and self.bytes < self.min_rate * self.window:
            raise TransientHTTPError(
                f"{self.host}: stalled below {self.min_rate:g} B/s for {self.window:g}s; reconnecting",
                timed_out=True,
            )


def stream_body(transfer, resp, seg, src, pos: int, buffer: memoryview, generation: int, *, skip: int = 0,
                compare: bool = False, until: int | None = None, pipe=None) -> None:
    """Read ``resp`` into the file from offset ``pos`` until ``seg`` ends, or ``until`` (where
    the answer ends), or the transfer stops.

    ``skip``: body bytes to drop first (an answer that started before ``pos``);
    ``compare``: they must equal the bytes already on disk there, else the remote
    changed (``Restart``). ``pipe``: the worker's ``net.splice.Pipe`` (None: none):
    a plain-HTTP body then moves from the socket to the file in the kernel, in reads
    of up to the pipe's size, after its first read (which empties http.client's buffer).

    ``transfer`` provides ``lock``, ``opt``, ``limiter``, ``quitting(src, generation)``,
    ``write_at(data, pos, generation)``, ``write_from_pipe(pipe, n, pos, generation)`` and
    ``record(seg, src, pos, n, generation)``.
    Raises:
        TransientHTTPError: the connection broke, timed out, closed early or stalled.
    """
    opt = transfer.opt
    host = host_of(src.url)
    stall = StallWatch(opt.stall_window, opt.stall_min_rate, host)
    limiter = opt.limiter
    last = _FIRST_READ
    splice = getattr(resp, "splice_into", None) if pipe is not None else None
    largest = max(len(buffer), pipe.size if splice is not None else 0)
    while skip > 0:
        if transfer.quitting(src, generation):
            return
        try:
            n = resp.readinto(buffer[:min(skip, len(buffer))])
        except Exception as exc:  # http.client / socket errors while streaming
            if transfer.quitting(src, generation):
                return
            raise TransientHTTPError(f"{host}: connection broke before byte {pos}: {describe_error(exc)}") from None
        if not n:
            raise TransientHTTPError(f"{host}: connection closed before byte {pos}")
        if compare and bytes(buffer[:n]) != os.pread(transfer.file.fd, n, pos - skip):
            from prefetch.engine.sources import Restart

            raise Restart(f"{host} sent other bytes than before at offset {pos - skip} (no ETag, Last-Modified "
                          f"or hash to tell versions apart); restarting from 0")
        skip -= n
        stall.add(n)
    while True:
        if transfer.quitting(src, generation):
            return
        # Ask for about twice what the last read brought (up to the buffer): reads stay
        # large on a fast link, and on a slow one the bytes in flight, which a work
        # stealer must leave alone, stay few.
        want = min(largest, max(_FIRST_READ, 2 * last))
        with transfer.lock:
            end = seg.end if until is None or (seg.end is not None and seg.end < until) else until
            if end is not None:
                if pos >= end:
                    return
                want = min(want, end - pos)
            if limiter is not None:
                want = min(want, limiter.chunk)
            seg.reading_to = pos + want
        if limiter is not None:
            # Booked before the read: what all connections have read never runs ahead of
            # the rate by more than one chunk (booking after a 512 KiB read let each
            # connection be a buffer ahead).
            limiter.wait(want)
        booked = want
        try:
            n = splice(pipe, want) if splice is not None else None
            spliced = n is not None
            if not spliced:
                want = min(want, len(buffer))
                n = resp.readinto(buffer[:want])
        except Exception as exc:  # http.client / socket errors while streaming
            if transfer.quitting(src, generation):
                return  # the transfer (or a demotion) aborted this read on purpose
            if _is_timeout(exc):
                raise TransientHTTPError(f"{host}: read timed out (no data for {opt.timeouts.read:g}s)",
                                         timed_out=True) from None
            raise TransientHTTPError(f"{host}: connection broke after byte {pos}: {describe_error(exc)}") from None
        if not n:
            if end is None:
                transfer.body_ended(seg, pos)
                return
            raise TransientHTTPError(f"{host}: connection closed at byte {pos} of {end}")
        last = n
        if not (transfer.write_from_pipe(pipe, n, pos, generation) if spliced
                else transfer.write_at(buffer[:n], pos, generation)):
            return
        if not transfer.record(seg, src, pos, n, generation):
            return  # bytes of a dropped source or an old generation are not trusted
        pos += n
        if limiter is not None and n < booked:
            limiter.refund(booked - n)
        stall.add(n)


def _is_timeout(exc: BaseException) -> bool:
    import socket

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (socket.timeout, TimeoutError)) or "timed out" in str(exc).lower():
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class PrefixHasher:
    """The hash of the file's contiguous prefix, caught up from the page cache as it grows."""

    def __init__(self, algorithm: str | None, part) -> None:
        self.algorithm = algorithm
        self.part = part
        self.lock = threading.Lock()  # one hashing pass at a time
        self.hasher = None
        self.hashed = 0
        self.reset()

    def reset(self) -> None:
        """Start over (the bytes already hashed are no longer trusted). Callers hold the transfer's lock."""
        self.hasher = new_hasher(self.algorithm) if self.algorithm else None
        self.hashed = 0

    def catch_up(self, prefix_end, transfer_lock) -> None:
        """Hash bytes up to ``prefix_end()`` (read under ``transfer_lock``)."""
        if self.hasher is None:
            return
        with self.lock:
            with transfer_lock:
                end = prefix_end()
                start, hasher = self.hashed, self.hasher
            if end > start:
                update_from_file(hasher, self.part, start, end)
                with transfer_lock:
                    if self.hasher is hasher:
                        self.hashed = end

    def follow(self, stop: threading.Event, wake: threading.Condition, prefix_end) -> None:
        """Catch up whenever ``wake`` is notified (or every 0.2 s) until ``stop``; a thread's loop."""
        while not stop.is_set():
            with wake:
                if not stop.is_set():  # checked under the lock: a stop's notify cannot slip in before the wait
                    wake.wait(0.2)
            try:
                self.catch_up(prefix_end, wake)
            except OSError:
                pass  # the main thread reports file errors

    def finish(self, size: int) -> str | None:
        """The digest of the whole file of ``size`` bytes."""
        if self.hasher is None:
            return None
        with self.lock:
            if self.hashed < size:
                update_from_file(self.hasher, self.part, self.hashed, size)
                self.hashed = size
        return self.hasher.hexdigest()
