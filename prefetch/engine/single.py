"""A small file in one answer: one GET on a near host's warm connection, without the transfer's machinery.

:func:`try_single` runs in ``download_to_part`` before a transfer is built (``transfer._Transfer``:
its sources, schedule, fetcher, main loop and state saver). On a near host (loopback, a LAN)
a small file costs CPU, not waiting, and most of that CPU was the transfer's bookkeeping
around its one answer.

It applies to one source on a host that has answered quicker than a long route can
(``SharedRouteJudge.near``), to a fresh file (no ``.part``, no resume record), without a rate
limit, before any stop. It takes one of the host's connection slots and a warm client as the
transfer's first request would, sends that same request (the first window of the file), and
keeps the answer only when ``check_response`` (the transfer's own check) accepts it as the
whole file in one answer of at most the inline size (``fetcher.INLINE_BODY``). Then the body
goes into the ``.part`` through ``stream_body`` (the transfer's reads, stall watch and errors),
is flushed and recorded as the transfer's saver does (``StateSaver.save``: no record for a
small complete file unless asked), and hashed when a hash is expected; the events are the
transfer's (START, its notes).

Everything else is the transfer's, from where this stopped (:class:`Handover`):

* an answer that is not the whole small file (bigger, no length, no total, a shape the check
  refuses): the open answer, its client and its connection slot go to the transfer's first
  request (``Fetcher.first_inline``), which reads on as if it had sent the request itself:
  nothing is asked twice;
* a failed request (connection trouble, 429/503, an error status) or a body that broke: the
  failure goes to that first request, which counts and handles it as its own (retry,
  backoff, ``Retry-After``, the host's cap, dropping the source); a broken body's bytes so
  far (at most the inline size) are not kept;
* a stop: the transfer starts, sees it and reports it as it does.

A stop while the request runs is watched as for the transfer's inline request (the shared
watchdog aborts the answer, or the socket a head is awaited on).
"""

from __future__ import annotations

import threading
import time

from prefetch.model.events import Event, EventKind
from prefetch.engine.inline import INLINE_BODY, thread_buffer, watch_inline
from prefetch.engine.part_file import PartFile
from prefetch.engine.resume_state import StateSaver, TransferState
from prefetch.engine.response_check import check_response, one_stream_note
from prefetch.engine.schedule import Segment, judge_clock, wire_time
from prefetch.engine.sources import Source
from prefetch.engine.stream import PrefixHasher, stream_body
from prefetch.engine.options import TransferResult


class Handover:
    """What the transfer's first request takes over: ``client`` (with the host's connection slot
    it holds), and either the open answer (``resp``, ``final_url``, ``latency`` and its thread's
    wait for a CPU, ``waited``) or the ``error`` its request met."""

    def __init__(self, client, *, resp=None, final_url: str | None = None, latency: float = 0.0,
                 waited: float | None = None, error: BaseException | None = None) -> None:
        self.client, self.resp, self.final_url, self.latency, self.error = client, resp, final_url, latency, error
        self.waited = waited

    def close(self) -> None:
        """Not taken over after all (the transfer stopped first): the answer and the client go (the
        caller gives the connection slot back)."""
        if self.resp is not None:
            self.resp.close()
        self.client.close()


def applies(host, urls: list[str], part, state_file, options, stop: threading.Event, *,
            fresh: bool | None = None) -> bool:
    """Whether :func:`try_single` may run for this download (see the module docstring); ``fresh``:
    the caller (holding the file's lock) found neither ``part`` nor ``state_file`` (None: look)."""
    if host is None or len(urls) != 1 or stop.is_set() or options.limiter is not None:
        return False
    if not host.route.near or not urls[0][:4].lower() == "http":
        return False
    if fresh is not None:
        return fresh
    from prefetch.fs.safefs import lstat_or_none

    return lstat_or_none(part) is None and lstat_or_none(state_file) is None


def try_single(*, host, url: str, part, state_file, algorithm: str | None, options, on_event, stop,
               client_factory, name: str) -> TransferResult | Handover | None:
    """The file in one answer (a TransferResult), or what the transfer takes over (a
    :class:`Handover`), or None (nothing was sent: the transfer runs as usual)."""
    if not host.try_lease():
        return None
    client = host.lender(client_factory)(timeouts=options.timeouts, resolve=options.resolve)
    try:
        return _ask(host, client, url, part, state_file, algorithm, options, on_event, stop, name)
    except BaseException:  # (a KeyboardInterrupt, a bug: the slot and the client are not left taken)
        client.close()
        host.release()
        raise


def _ask(host, client, url: str, part, state_file, algorithm, options, on_event, stop, name: str):
    one = _One(options, stop, part, name, on_event)
    started = time.monotonic()
    src = Source(url)
    ask_end = None if options.connections == 1 else options.first_request
    headers = dict(options.headers)
    headers["Range"] = f"bytes=0-{'' if ask_end is None else ask_end - 1}"
    watch = watch_inline(one)  # (a stop aborts the answer or the head wait, as for the inline request)
    resp = None
    try:
        try:
            from prefetch.net.http import open_url

            if hasattr(client, "prepare"):
                client.prepare(url)  # (as the transfer's request: imports are not the route's latency)
            clock = judge_clock(host.route)
            asked = time.monotonic()
            resp, final_url = open_url(client, url, headers=headers, timeouts=options.timeouts)
            latency, waited = wire_time(time.monotonic() - asked, clock)
        except Exception as exc:  # noqa: BLE001 - the transfer's first request meets it as its own
            if stop.is_set():
                return _given_up(host, client)
            return Handover(client, error=exc)
        with one.lock:
            one.responses[0] = resp
        src.effective_url = final_url
        try:
            answer = check_response(resp, start=0, known_size=None, src=src, ranged=True, others=False,
                                    have_bytes=False, name=name, end=ask_end, hashed=algorithm is not None)
        except Exception:  # noqa: BLE001 - the transfer checks the same answer again and handles it
            answer = None
        if (answer is None or answer.total is None or answer.first or answer.skip or answer.end != answer.total
                or answer.total > INLINE_BODY or stop.is_set()):
            with one.lock:
                one.responses.pop(0, None)
            handed, resp = resp, None
            if stop.is_set():
                handed.close()
                return _given_up(host, client)
            return Handover(client, resp=handed, final_url=final_url, latency=latency, waited=waited)
        host.route.add(latency, resp.round_trip() if hasattr(resp, "round_trip") else None, waited)  # (the transfer's first request does it for an answer it takes over)
        on_event(Event(EventKind.START, name, done=0, total=None))  # (the transfer's, when it takes over)
        src.learn(answer.etag, answer.last_modified)
        if answer.note:
            one.note(answer.note, answer.total)
        if algorithm is None and not (src.etag or src.last_modified):
            one.note(one_stream_note(url), answer.total)
        done, resp = _complete(one, host, client, resp, src, answer, algorithm, started, state_file, part,
                               url, options), None
        return done
    finally:
        watch()
        if resp is not None:
            resp.close()


def _given_up(host, client) -> None:
    """Stopped before anything was kept: the slot and the client go back; the transfer reports the stop."""
    client.close()
    host.release()
    return None


def _complete(one: "_One", host, client, resp, src: Source, answer, algorithm, started: float, state_file,
              part, url: str, options):
    """Read the whole small body into the ``.part``, flush it and record it as the transfer's saver does."""
    one.size = size = answer.total
    seg = Segment(start=0, pos=0, end=size)
    buffer = thread_buffer(options.chunk_size)  # (the thread's reused read buffer, as for the inline request)
    one.file.open()
    try:
        broke = None
        try:
            one.file.truncate()  # (nothing to do for the fresh file checked for, which our lock holds since)
            stream_body(one, resp, seg, src, 0, buffer, 0, until=size)
        except Exception as exc:  # noqa: BLE001 - the transfer's first request meets it as its own
            broke = exc
        if broke is not None or seg.pos < size:  # broken, or stopped while reading
            resp.close()
            one.file.truncate()  # (no byte of it is kept: the transfer starts the file over)
            if broke is None or one.stop.is_set():
                return _given_up(host, client)  # the transfer starts and reports the stop
            return Handover(client, error=broke)
        hasher = PrefixHasher(algorithm, part)
        saver = StateSaver(state_file, part, sync=options.sync_data, on_error=None)
        state = TransferState(urls=[url], size=size, ranges=not answer.whole_body, validators={url: src.validators()},
                              done=[[0, size]], algorithm=algorithm)
        saver.save((state, size, one.file.fd), small_record=options.small_record)
    finally:
        one.file.close()
    resp.close()
    client.close()
    host.release()
    return TransferResult(size=size, digest=hasher.finish(size), algorithm=algorithm, downloaded=size, reused=0,
                          elapsed=time.monotonic() - started, connections=1, restarts=0, sources_dropped=[],
                          served={url: size}, part_ident=one.file.ident)


class _One:
    """What ``stream_body`` and the inline stop watch ask of a transfer, for one answer."""

    generation = 0

    def __init__(self, options, stop: threading.Event, part, name: str, emit) -> None:
        self.opt = options
        self.stop = stop
        self.lock = threading.Lock()
        self.responses: dict = {}
        self.file = PartFile(part)
        self.name = name
        self.emit = emit
        self.size: int | None = None
        self.done = 0
        self.started = self.last = time.monotonic()

    def quitting(self, src, generation: int) -> bool:
        now = time.monotonic()
        if now - self.last >= self.opt.progress_interval:  # (what the transfer's inline request reports)
            self.last = now
            self.emit(Event(EventKind.PROGRESS, self.name, done=self.done, total=self.size, connections=1,
                            rate=self.done / max(1e-3, now - self.started), elapsed=now - self.started))
        return self.stop.is_set()

    def _remaining(self) -> int | None:
        return None if self.size is None else self.size - self.done

    def write_at(self, data, pos: int, generation: int) -> bool:
        self.file.write_at(data, pos, needed=self._remaining)
        return True

    def record(self, seg: Segment, src: Source, pos: int, n: int, generation: int) -> bool:
        seg.pos = pos + n
        self.done = max(self.done, pos + n)
        src.delivered += n
        return True

    def body_ended(self, seg: Segment, pos: int) -> None:
        seg.end = pos  # (not reached: only an answer of known length is read here)

    def note(self, message: str, total: int | None) -> None:
        self.emit(Event(EventKind.NOTE, self.name, done=self.done, total=total, message=message))
