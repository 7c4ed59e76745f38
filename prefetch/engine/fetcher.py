"""One connection's worker thread: take a segment, request it, check the answer, stream it.

Each worker has its own HTTP client (a requests ``Session``, so its connection is
kept alive from one segment to the next) and one reused read buffer. Trouble is
sorted here: a changed remote restarts the transfer, a disagreeing source is
dropped and distrusted, a refusal while other connections deliver means fewer
connections, anything else transient waits as ``retry`` says.
"""

from __future__ import annotations

import threading
import time

from prefetch.errors import NetworkError
from prefetch.model.events import Event, EventKind
from prefetch.net.failures import Failure, TransientHTTPError, shown_text
from prefetch.net.http import open_url
from prefetch.net.splice import Pipe
from prefetch.net.urls import host_of, redact_url
from prefetch.engine import ahead as _ahead
from prefetch.engine.accept_answer import accept_answer, request_end
from prefetch.engine.inline import INLINE_BODY, WATCH, drop_thread_buffer, thread_buffer, watch_inline
from prefetch.engine.response_check import Answer, check_response, one_stream_note
from prefetch.engine.retry import CROWDED
from prefetch.engine.schedule import Segment, judge_clock, wire_time
from prefetch.engine.sources import Restart, Source, SourceBad
from prefetch.engine.stream import stream_body


_OVERLAP = 64 << 10  # bytes asked again when a stream nothing can check resumes
_SPLICE_FROM = 1 << 20  # bodies this long open the worker's pipe (a small file never needs one)
_LATE = 1.0  # seconds a refused worker waits, at most, for the answers of requests still out
class _HandedOver(BaseException):
    """The inline first request's answer is long: a worker thread reads it on (Fetcher._hand_over)."""


class Fetcher:
    """The worker side of a transfer (``prefetch.engine.transfer._Transfer``), one thread per worker id."""

    def __init__(self, transfer) -> None:
        self.t = transfer

    pipe: Pipe | None = None
    inline = False  # this worker runs on the transfer's own thread (its first request only)
    pending = None  # a handed-over answer: (resp, final_url, answer, overlap, generation, start, ask_end)
    handed_to: threading.Thread | None = None  # the worker thread an inline request handed its answer to
    ahead = None  # engine.ahead.Ahead: the next request, sent before this answer ended
    began: float | None = None  # when this worker's current try began (RetryPolicy.failed's waves)
    asked_url: str | None = None  # where its last request went (a source's URL, or where it redirected)

    @classmethod
    def first_inline(cls, t, started: float, threads: list[threading.Thread]) -> bool:
        """The probe (the first request, size unknown) on the transfer's own thread: a small
        file then needs no worker thread and no main-loop pass at all. A long answer goes on
        in a worker thread (added to ``threads``) and the main loop ramps up as after any
        probe. False: not possible now (the main loop starts worker 0 as usual)."""
        handed = t.first_answer  # (engine/single.py: the request went out already, on a slot it holds)
        if t.size is not None or t.stop.is_set() or t.fatal or t.restart:
            if handed is not None:
                t.first_answer = None
                handed.close()
                t.host.release()
            return False
        if handed is None:
            if t.host is None or t.host.route.fastest is None:
                # Only to a host that has answered in this run: a connect to a host that never
                # answers the handshake (a route blocked abroad) cannot be aborted on this thread
                # and would hold a stop for the connect timeout; a worker thread can be left behind.
                return False
            if not t.host.try_lease():
                return False
        t.retries.progress()
        with t.lock:
            t.active_workers += 1
            t.max_workers_seen = max(t.max_workers_seen, t.active_workers)
        last = [time.monotonic()]

        def tick() -> None:  # what the main loop would report meanwhile (the stop is watched apart)
            now = time.monotonic()
            if now - last[0] >= t.opt.progress_interval:
                last[0] = now
                done = t.done.total()
                t.emit(Event(EventKind.PROGRESS, t.name, done=done, total=t.size, connections=1,
                             rate=done / max(1e-3, now - started), elapsed=now - started))

        fetcher = cls(t)
        t.inline_tick = tick
        try:
            fetcher.run(0, inline=True, client=handed.client if handed is not None else None)
        finally:
            t.inline_tick = None
        if fetcher.handed_to is not None:
            threads.append(fetcher.handed_to)
        return True

    def run(self, worker_id: int, *, inline: bool = False, client=None, buffer: memoryview | None = None,
            first: tuple[Segment, Source] | None = None) -> None:
        """Run worker ``worker_id`` until nothing is left for it.

        ``inline``: on the caller's thread (the file's own), for the first request only: no
        new thread for a small file. Its answer, when short (``INLINE_BODY``), is read here;
        a long one is handed to a new worker thread at once (:attr:`handed_to`), so a big
        file ramps up as before. The stop is watched on the shared watchdog thread meanwhile.
        """
        self.inline = inline
        if client is None:
            client = self.t.client_factory(timeouts=self.t.opt.timeouts, resolve=self.t.opt.resolve)
        if buffer is None:
            buffer = thread_buffer(self.t.opt.chunk_size) if inline else memoryview(bytearray(self.t.opt.chunk_size))
        self.pipe: Pipe | None = None  # opened for the first large plain-HTTP body (net/splice.py)
        watch = watch_inline(self.t) if inline else None
        try:
            self._loop(worker_id, client, buffer, first=first, once=inline)
        except _HandedOver:
            return  # the worker thread owns the client, the buffer and the worker's slot now
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            with self.t.lock:
                if self.t.fatal is None:
                    self.t.fatal = exc
                self.t.wake.notify_all()
        finally:
            if watch is not None:
                watch()
            _ahead.drop(self, client)
        client.close()
        if self.pipe is not None:
            self.pipe.close()
        self.t.worker_left(worker_id)

    def _loop(self, worker_id: int, client, buffer: memoryview, *, first=None, once: bool = False) -> None:
        tries = 0
        while first is not None or not self.t.stop.is_set():
            if once and tries:
                return  # the transfer's main loop takes it from here
            tries += 1
            self.began = time.monotonic()  # (a failure of this try counts once per wave: RetryPolicy.failed)
            if first is not None:
                (seg, src), first = first, None
            elif (taken := _ahead.next_segment(self, client)) is not None:
                seg, src = taken  # its request went out before the last answer ended
            else:
                if self._step_back(worker_id):
                    return  # the server refused more connections: this one steps back
                seg = self.t.take_segment(worker_id)
                if seg is None:
                    return
                with self.t.lock:
                    src = self.t.sources.choose(worker_id)
                if src is None:
                    self.t.release(seg)
                    with self.t.lock:
                        if self.t.fatal is None:
                            self.t.fatal = NetworkError(f"every source failed for {self.t.name}")
                    return
            try:
                # A request asks for a closed range (a window of the segment): the next one
                # goes out on the same kept-alive connection while the segment lasts.
                try:
                    while (self.fetch(worker_id, seg, src, client, buffer) and not once
                           and (self.ahead is not None or not self._step_back(worker_id))):
                        pass  # (a request sent ahead is read before stepping back: it was asked)
                except BaseException:
                    _ahead.drop(self, client, seg, failed=True)  # (its connection closes, a segment taken goes back)
                    raise
                if self.ahead is not None and self.ahead.seg is seg:
                    _ahead.drop(self, client, seg)
                self.t.release(seg)
            except Restart as exc:
                self.t.release(seg)
                with self.t.lock:
                    if self.t.restart is None:
                        self.t.restart = exc
                    self.t.wake.notify_all()
                return
            except SourceBad as exc:
                self.t.release(seg)
                self.t.drop_source(src, str(exc), distrust=True)
            except TransientHTTPError as exc:
                self.t.release(seg)
                if exc.status in CROWDED and self._crowded(worker_id, src, exc.status):
                    continue  # fewer connections from now on; others still deliver, so no backoff here
                if exc.kind == Failure.WEB_PAGE:
                    src.effective_url = None  # a redirect to a portal's login page must not stick
                if exc.unresolved is not None:
                    self.t.retries.unresolved.append(exc.unresolved)  # (a source dropped: named in the last one's line)
                elif exc.unreached is not None:
                    self.t.retries.unreached.append(exc.unreached)
                if self._dead(src, exc) and self.t.drop_source(src, exc.cause, distrust=False):
                    if exc.kind == Failure.UNREACHABLE:  # DNS, refused: worth another try later in a long run
                        src.revive_at = time.monotonic() + self.t.opt.revive_after
                    continue  # another source remains: no time lost on this one
                self._retry_later(src, str(exc), exc.retry_after, exc.kind, exc)
            except NetworkError as exc:
                self.t.release(seg)
                status = getattr(exc, "status", None)
                with self.t.lock:
                    expired = src.link_expired(self.asked_url, status)
                if expired:  # (before the 403 is taken for a connection cap: the link, not the count)
                    self.t.note(f"the link {host_of(src.url)} redirected to was refused (HTTP {status}; a signed link "
                                f"that expired?): asking {redact_url(src.url)} for a new one")
                    continue
                if status == 403 and self._crowded(worker_id, src, status, at_once=True):
                    continue  # other connections to it work: this one was refused, not the file
                if not self.t.drop_source(src, str(exc), distrust=False):
                    raise

    def _hand_over(self, worker: int, seg: Segment, src: Source, client, buffer: memoryview, pending) -> None:
        """Read the rest of this (long) answer on a new worker thread, which then goes on as any worker."""
        rest = Fetcher(self.t)
        rest.pending = pending
        self.t.inline_tick = None  # the main loop reports progress again
        drop_thread_buffer()  # the buffer goes with it: this thread takes a fresh one for its next file
        thread = threading.Thread(target=rest.run, args=(worker,), daemon=True,
                                  kwargs={"client": client, "buffer": buffer, "first": (seg, src)})
        self.handed_to = thread
        thread.start()

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less: the generation ends, or (inline, where no main loop watches) the stop.
        Meanwhile it is ``pausing``: no request out, nothing for the others to wait for (ahead.py)."""
        with self.t.lock:
            self.t.pausing += 1
        try:
            if not self.inline:
                self.t.interrupt.wait(seconds)
                return
            until = time.monotonic() + seconds
            while not self.t.stop.is_set() and (left := until - time.monotonic()) > 0:
                if self.t.interrupt.wait(min(left, WATCH)):
                    return
        finally:
            with self.t.lock:
                self.t.pausing -= 1

    def _dead(self, src: Source, exc: TransientHTTPError) -> bool:
        """A failure that drops ``src`` at once while another source remains.

        A name that does not resolve, a refused or unreachable connection and a web page
        are not going to get better in seconds; no answer at all counts too while the
        source has never delivered a byte.
        """
        if self.t.stop.is_set() or self.t.interrupt.is_set():
            return False
        if exc.kind in (Failure.UNREACHABLE, Failure.WEB_PAGE):
            return True
        return exc.kind == Failure.TIMEOUT and not src.delivered

    def _step_back(self, worker_id: int) -> bool:
        """More workers run than the server accepts: should this one go?

        Workers that never had an answer go first; one that delivers goes only when
        those are not enough (it would otherwise leave the refused ones running).
        """
        with self.t.lock:
            return self.t.steps_back_locked(worker_id)

    # -- one request -------------------------------------------------------
    def fetch(self, worker: int, seg: Segment, src: Source, client, buffer: memoryview) -> bool:
        """Download one window of ``seg`` from ``src``; True when it was read whole and more of ``seg`` remains."""
        pending, self.pending = self.pending, None
        if pending is None:
            resp, final_url, start, overlap, known_size, ranged, generation, ask_end = self._ask(worker, seg, src, client)
        else:
            resp, final_url, answer, overlap, generation, start, ask_end = pending
        handed = False
        try:
            if pending is None:
                src.effective_url = final_url
                answer = check_response(resp, start=start - overlap, known_size=known_size, src=src, ranged=ranged,
                                        others=self._others, have_bytes=self._have_bytes,
                                        name=self.t.name, end=ask_end, hashed=self.t.algorithm is not None)
                pinned_now = accept_answer(self.t, answer, seg, src, ask_end)
                if answer.note:
                    self.t.note(answer.note)
                if pinned_now:
                    self.t.note(one_stream_note(src.url))
                if self.inline and (answer.end is None or answer.end - answer.first > INLINE_BODY):
                    self._hand_over(worker, seg, src, client, buffer,
                                    (resp, final_url, answer, overlap, generation, start, ask_end))
                    handed = True
                    raise _HandedOver
            self._pipe_for(answer, final_url)
            body = _ahead.body_for(self, worker, seg, src, client, resp, answer, overlap, generation)
            stream_body(self.t, body, seg, src, answer.first + overlap, buffer, generation,
                        skip=answer.skip + overlap, compare=bool(overlap), until=answer.end, pipe=self.pipe)
        finally:
            if not handed:
                with self.t.lock:
                    self.t.responses.pop(worker, None)
                resp.close()
        with self.t.lock:
            return (not self.t.quitting(src, generation) and not self.t.interrupt.is_set()
                    and seg.end is not None and seg.pos < seg.end)

    _have_bytes = False  # (both read with the answer's head, under the lock)
    _others = False

    def _ask(self, worker: int, seg: Segment, src: Source, client):
        """Send the request for the next window of ``seg``; its answer's head is back."""
        headers: dict[str, str] = dict(self.t.opt.headers)
        with self.t.lock:
            start = seg.pos
            known_size = self.t.size
            ranged = self.t.ranges_ok
            generation = self.t.generation
            ahead = _ahead.taken(self, seg, start, generation)  # (sent already: its answer is on the way)
            ask_end = ahead.end if ahead is not None else request_end(self.t, seg, start) if ranged else seg.end
            seg.asked_to, seg.asked_from, seg.asked_at = ask_end or 0, start, time.monotonic()
        overlap = 0
        if ranged:
            if start > 0 and not ahead and self.t.sources.pinned is src and not (src.etag or src.last_modified):
                # Nothing vouches that this answer is the same version as the bytes on
                # disk (no hash, no validator): ask again for the last bytes we have, and
                # compare them before going on (stream_body).
                overlap = min(start, _OVERLAP)
            headers = ahead.headers if ahead else _ahead.range_headers(self.t, src, start, ask_end, overlap)
        url = self.asked_url = ahead.url if ahead else src.effective_url or src.url
        handed, self.t.first_answer = self.t.first_answer, None
        if handed is not None:  # this very request was sent already (engine/single.py): take what it met
            if self.t.probe_asked is None:
                self.t.probe_asked = time.monotonic() - handed.latency
            if handed.error is not None:
                raise handed.error
            resp, final_url, latency, waited = handed.resp, handed.final_url, handed.latency, handed.waited
        else:
            if hasattr(client, "prepare"):
                client.prepare(url)  # (imports and session set-up are not the route's latency)
            clock = judge_clock(self.t.route) if ahead is None else None
            asked = time.monotonic()
            if known_size is None and self.t.probe_asked is None:
                self.t.probe_asked = asked  # (the main loop opens connections ahead while it waits: preconnect.py)
            try:
                resp, final_url = open_url(client, url, headers=headers, timeouts=self.t.opt.timeouts)
            finally:
                _ahead.out_of_step(self, client, ahead)  # (the answer before it ended out of step?)
            latency, waited = wire_time(time.monotonic() - asked, clock)
        rtt = resp.round_trip() if ahead is None and hasattr(resp, "round_trip") else None
        with self.t.lock:
            self.t.responses[worker] = resp
            self.t.answered.add(worker)
            self.t.worker_source[worker] = src
            # What a new request costs (a connection, the round trips to the first byte):
            # the ramp judges over several of these, and a split must save more than one.
            if ahead is None:  # (an answer to a request sent ahead came sooner: not the route's)
                self.t.note_latency(latency, rtt, waited)
            self._others = bool(self.t.sources.others(src))
            self._have_bytes = bool(self.t.done.total())
        return resp, final_url, start, overlap, known_size, ranged, generation, ask_end

    def _pipe_for(self, answer: Answer, url: str) -> None:
        """Open the worker's pipe for a plain-HTTP body worth splicing; empty it when a move was cut short."""
        if self.pipe is not None:
            self.pipe = self.pipe.clean()
        elif (self.t.opt.splice and url[:5].lower() == "http:" and answer.end is not None
              and answer.end - answer.first >= _SPLICE_FROM):
            self.pipe = Pipe.open()

    def _crowded(self, worker_id: int, src: Source, status: int, *, at_once: bool = False) -> bool:
        """The server refused a request while other connections to it deliver: keep fewer.

        Returns False when it is not (yet) taken as a connection cap: the usual path follows.
        """
        # Requests sent together (a long route opens its connections at once) answer
        # together: let the others' answers arrive before counting who delivers (and those
        # still on their way: a served answer can come after the refusals, ``_LATE``).
        self._pause(min(self.t.latency or 0.0, 1.0))
        until = time.monotonic() + _LATE
        while self.t.asking(worker_id) and time.monotonic() < until:
            self._pause(0.01)
        with self.t.lock:
            delivering = len([w for w in self.t.answered - {worker_id} if self.t.worker_source.get(w) is src])
            limit, first = self.t.retries.refused(delivering=delivering, live_sources=len(self.t.sources.live()),
                                                at_once=at_once)
            if limit is None:
                return False
            self.t.worker_limit = min(self.t.worker_limit or limit, limit)
            if self.t.opt.connections is None:
                # The few connections the server allows share the rest in pieces: none
                # holds a big segment to the end while the others are done; they end together.
                self.t.schedule.piece, self.t.schedule.even = self.t.opt.piece_size, True
        if first:
            self.t.note(f"{host_of(src.url)} answered HTTP {status} to connection {delivering + 1}; "
                       f"staying at {delivering} connection{'s' if delivering != 1 else ''}")
        return True

    def _retry_later(self, src: Source, message: str, retry_after: float | None, kind: str, error=None) -> None:
        if self.t.stop.is_set() or self.t.interrupt.is_set():
            return  # we are shutting down: the broken read is ours, not the network's
        with self.t.lock:
            attempts = self.t.retries.failed(self.began)
            give_up_source = self.t.sources.note_failure(src, self.t.opt.source_failures)
        if give_up_source:
            self.t.drop_source(src, f"{message} ({src.failures} failures in a row)", distrust=False)
            return
        delay = self.t.retries.delay(attempts, retry_after, name=self.t.name, message=message, kind=kind,
                                     fresh=not self.t.downloaded, error=error)
        self.t.note(f"{shown_text(message)}; retry {attempts}/{self.t.opt.max_attempts} in {delay:.1f}s")
        self._pause(delay)
