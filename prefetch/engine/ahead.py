"""A connection's next request, sent before its current answer ends (HTTP/1.1 pipelining, issue 20).

Between two answers a kept-alive connection idles one round trip: it reads the last byte,
sends the next request and waits for that answer's first byte. On a long or capped route that
is the cost of every request after a connection's first (30 ms of each 1.5 s piece paced at
2 MiB/s; one round trip of the second round of requests at 200 ms). Here, once the answer
being read is within about two round trips of bytes of its end (at the connection's rate, or at
once for a short one), the worker decides what it asks next, as it would after the answer:
the next window of its segment, else a new segment (a pending piece, or a split of another
connection's, never of its own), and writes that request on the same connection
(``net/pipeline.py``: only where it is safe, else nothing is sent and all goes on as before).

Nothing is sent ahead while the transfer still adds connections or one still waits for its
first answer (what this one would ask is theirs to split), and a new segment only from the
source the worker would choose anyway. The range asked ahead is the owner's: its segment's
``asked_to`` covers it and ``ahead`` marks it, so a split (``Schedule.split_point``, a
straggler's too) leaves it whole and the answer is read to its last byte (the bytes served
stay the file's). The next ``Fetcher._ask`` takes the answer instead of sending again
(:func:`taken`); a request sent ahead that is not wanted any more (the transfer stops, the
source is dropped, the worker steps back, the answer before it broke) is dropped with its
connection (:func:`drop`) and a segment taken for it goes back to the schedule. Only on a
route whose quickest answer is at least ``_MIN_ROUND_TRIP`` (loopback and a LAN gain nothing).
"""

from __future__ import annotations

import time

_MIN_ROUND_TRIP = 0.003  # seconds: a route shorter than this sends nothing ahead
_SLACK = 64 << 10  # bytes: an answer's rest this short sends the next request at once
_ROUND_TRIPS = 2  # ... else its rest within this many round trips at the connection's rate


class Ahead:
    """A request sent ahead: ``seg`` from ``start`` to ``end`` on ``src`` (``new``: a segment
    taken for it, not the one being read), with its ``headers`` and ``url``, in ``generation``;
    ``before``: the bytes (from, end) the answer it was sent during read after it went out."""

    __slots__ = ("seg", "src", "start", "end", "headers", "url", "generation", "new", "key", "before")

    def __init__(self, seg, src, start, end, headers, url, generation, new, key, before) -> None:
        self.seg, self.src, self.start, self.end = seg, src, start, end
        self.headers, self.url, self.generation, self.new = headers, url, generation, new
        self.key = key  # the connection's (scheme, host, port)
        self.before = before


def range_headers(t, src, start: int, end: int | None, overlap: int = 0) -> dict[str, str]:
    """The headers of a request for ``[start - overlap, end)`` of ``src`` (``end`` None: open)."""
    headers: dict[str, str] = dict(t.opt.headers)
    headers["Range"] = f"bytes={start - overlap}-{'' if end is None else end - 1}"
    if start > 0 or src.etag or src.last_modified:
        headers.update(src.validator_headers())
    return headers


class Body:
    """``resp`` as ``stream_body`` reads it: before each read, once the rest of the answer is
    within reach (``_SLACK``, or ``_ROUND_TRIPS`` round trips at the connection's rate: the
    transfer's per connection, then this answer's own once it has run a round trip), ``fire``
    is called, until it returns True (done: sent, or nothing to send for this answer)."""

    __slots__ = ("resp", "raw", "fire", "rtt", "rate", "started", "got")

    def __init__(self, resp, fire, rtt: float, rate: float) -> None:
        self.resp, self.raw, self.fire, self.rtt, self.rate = resp, resp._raw, fire, rtt, rate
        self.started = None
        self.got = 0

    def _near(self) -> None:
        left = self.raw.length
        if left is None:
            self.fire = None
            return
        now = time.monotonic()
        if self.started is None:
            self.started = now
        elif now - self.started >= self.rtt:  # (the first reads may be a burst: no rate yet)
            self.rate = self.got / (now - self.started)
        if left <= _SLACK + _ROUND_TRIPS * self.rtt * self.rate and self.fire():
            self.fire = None

    def readinto(self, buffer) -> int:
        if self.fire is not None:
            self._near()
        n = self.resp.readinto(buffer)
        self.got += n
        return n

    def splice_into(self, pipe, amount: int):
        if self.fire is not None:
            self._near()
        n = self.resp.splice_into(pipe, amount)
        if n:
            self.got += n
        return n


def body_for(f, worker: int, seg, src, client, resp, answer, overlap: int, generation: int):
    """What ``f`` (a ``Fetcher``) streams ``resp`` from: a :class:`Body` that sends the next
    request ahead where that may pay, else ``resp`` itself."""
    t = f.t
    rtt = t.route.fastest
    if (f.inline or overlap or answer.end is None or rtt is None or rtt < _MIN_ROUND_TRIP or t.size is None
            or not t.ranges_ok or t.sources.pinned is not None or f.ahead is not None):
        return resp
    from prefetch.net.pipeline_send import pipelinable

    if not pipelinable(client, resp):  # (a local file's answer, requests', one that closes)
        return resp
    return Body(resp, lambda: send_next(f, worker, seg, src, client, resp, answer.end, generation),
                rtt, t.conn_rate)


def send_next(f, worker: int, seg, src, client, resp, until: int, generation: int) -> bool:
    """Decide what the worker asks after this answer (ending at ``until``) and send it ahead.

    False: not yet, while the transfer still adds connections (what this one would ask ahead is
    theirs to split: a long route's connections opened during the probe would find nothing).
    A new segment only from the source this worker would choose for it (mirrors share the work)."""
    from prefetch.engine.accept_answer import request_end
    from prefetch.net.pipeline_send import send_ahead

    t = f.t
    with t.lock:
        if (f.ahead is not None or t.quitting(src, generation) or t.interrupt.is_set() or seg.end is None
                or seg.end < until or not t._splittable_locked()):
            return True
        if (t.max_workers_seen < (t.opt.connections or t.planned_workers or t.opt.max_connections)
                or len(t.answered) + t.pausing < t.active_workers):
            return False  # (connections still to come, or one still waiting for its first answer)
        if t.steps_back_locked(worker):
            return True  # (this one is to step back: a refusal, or another process waits for a slot)
        if seg.end > until:
            nxt, start = seg, until  # the next window of this segment
        else:
            if t._finished_locked() or t.fatal or t.restart or t.sources.choose(worker) is not src:
                return True
            nxt = t.schedule.take(worker, splittable=True, smallest=t._smallest_piece(),
                                  low_first=t.hash.hasher is not None, besides=seg)
            if nxt is None:
                return True
            start = nxt.pos
        end = request_end(f.t, nxt, start)
        before = nxt.asked_to, nxt.asked_from, nxt.asked_at
        # A split leaves what is asked whole; the owner's rate is judged from now on, as
        # from a request sent after the answer (a straggler is one slow since its last request).
        nxt.asked_to, nxt.asked_from, nxt.asked_at = end or 0, nxt.pos, time.monotonic()
        nxt.ahead = True
    headers = range_headers(t, src, start, end)
    url = src.effective_url or src.url
    read_to = until - (resp._raw.length or 0)  # (what the answer reads from now on could be the next's)
    try:
        sent = send_ahead(client, resp, url, headers, start, end)
    except Exception:  # noqa: BLE001 - nothing sent: the request goes out after the answer as before
        sent = None
    if sent is not None:
        f.ahead = Ahead(nxt, src, start, end, headers, url, generation, nxt is not seg, sent, (read_to, until))
        with t.lock:
            t.unconfirmed[id(f.ahead)] = (read_to, until)  # (not saved as done until in step: out_of_step)
        return True
    with t.lock:
        nxt.ahead = False
        if nxt is seg:
            seg.asked_to, seg.asked_from, seg.asked_at = before
        else:
            t.schedule.release(nxt)
    return True


def taken(f, seg, start: int, generation: int):
    """The request sent ahead for ``seg`` from ``start``, now to be asked (its answer is on the
    connection already), else None: one sent for something else is dropped (its connection is
    closed at the next request, a segment taken for it goes back, and what the answer before it
    read after it went out is fetched again: :func:`drop`). Callers hold the lock."""
    ahead, f.ahead = f.ahead, None
    if ahead is None:
        return None
    ahead.seg.ahead = False
    if ahead.seg is seg and ahead.start == start and ahead.generation == generation:
        return ahead
    _distrust_locked(f.t, ahead)  # (its head is never read: nothing says the answer before ended in step)
    if ahead.new and ahead.seg is not seg:
        f.t.schedule.release(ahead.seg)  # (callers hold the transfer's lock)
    return None


def out_of_step(f, client, ahead) -> None:
    """After the request sent ahead was asked (``ahead``): when its answer began with bytes
    that are not an answer's head (``net/pipeline.py``), the answer read before it on that
    connection may have run short of its ``Content-Length`` and taken that head's first bytes
    for its last: what it read after the request went out is fetched again (:func:`_distrust`)."""
    from prefetch.net.pipeline_send import misframed

    if ahead is None:
        return
    why = misframed(client)
    if why:
        _distrust(f.t, ahead, _NO_HEAD.get(why, "ended out of step"))
    else:
        with f.t.lock:
            f.t.unconfirmed.pop(id(ahead), None)  # (its head began in step: the bytes before are the file's)


# What the note says came after the answer instead of the next one's head (net/pipeline.py).
_NO_HEAD = {"closed": "was cut off (the server closed or reset the connection)",
            "stalled": "was followed by no answer in time", "out of step": "ended out of step"}


def _distrust(t, ahead, why: str) -> None:
    """The bytes the answer ``ahead`` was sent during read after it went out (``ahead.before``)
    are no longer counted done and are fetched again, the prefix hash starting over when they
    were in it (as a distrusted source's): they may be the next answer's, not the file's."""
    with t.lock:
        parts = _distrust_locked(t, ahead)
    if parts:
        lo, hi = ahead.before
        t.note(f"an answer on a connection with a request sent ahead {why}; bytes {lo}-{hi - 1} "
               "are fetched again")


def _distrust_locked(t, ahead) -> list:
    """:func:`_distrust` without the note; callers hold the transfer's lock."""
    t.unconfirmed.pop(id(ahead), None)
    lo, hi = ahead.before
    parts = [(max(a, lo), min(b, hi)) for a, b in t.done.as_list() if a < hi and b > lo]
    for a, b in parts:
        t.done.remove(a, b)  # (only what it marked done: a part another worker has is its)
        if a < t.hash.hashed:
            t.hash.reset()
        t.schedule.add(a, b)
    if parts:
        t.schedule.prune()
        t.dirty = True
        t.wake.notify_all()
    return parts


def next_segment(f, client):
    """(segment, source) taken ahead for the worker's next request, else None (a stale one dropped)."""
    ahead = f.ahead
    if ahead is None:
        return None
    t = f.t
    with t.lock:
        ok = (ahead.new and not t.quitting(ahead.src, ahead.generation) and not t.interrupt.is_set()
              and ahead.seg.end is not None and ahead.seg.pos == ahead.start)
    if ok:  # (read even when the worker is to step back: it was asked, its bytes are on their way)
        return ahead.seg, ahead.src
    drop(f, client)
    return None


def drop(f, client, current=None, *, failed: bool = False) -> None:
    """Forget the request sent ahead (its connection closed); a segment taken for it goes back.

    ``failed``: the answer before it broke. A server that closes a connection after an answer
    resets it when a request it will not read is waiting there (the answer's last bytes are
    lost with it): its host gets no more pipelining (``net/pipeline.py``). Whether or not it
    broke, what that answer read after the request went out may be the start of the answer to
    it (the answer before ran short), and no head read after it says otherwise: it is fetched
    again (:func:`_distrust`)."""
    ahead, f.ahead = f.ahead, None
    if ahead is None:
        return
    from prefetch.net.pipeline import refuse
    from prefetch.net.pipeline_send import forget

    ahead.seg.ahead = False
    if failed:
        refuse(ahead.key)
    # Its head is never read (nothing says the answer before ended in step), or that answer broke.
    _distrust(f.t, ahead, "broke" if failed else "was dropped unread")
    forget(client)
    if ahead.seg is not current and ahead.new:
        f.t.release(ahead.seg)
