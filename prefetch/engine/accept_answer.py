"""One request's place in its transfer's state: where its range ends, and what its accepted
answer tells the transfer (size, validators, one stream, a range shorter or later than asked).

Both run under the transfer's lock (``request_end``: its caller holds it; ``accept_answer``
takes it) and touch nothing but that state: no I/O. The worker that sends the request and
reads its answer is ``fetcher.py``'s.
"""

from __future__ import annotations

from prefetch.engine.response_check import Answer
from prefetch.engine.schedule import Segment
from prefetch.engine.sources import Source, SourceBad


def request_end(t, seg: Segment, start: int) -> int | None:
    """Where this request's range ends (exclusive; None: open-ended). Callers hold the lock.

    One connection (``--connections 1``, or one stream pinned) asks for the whole rest:
    nobody splits it. Otherwise a closed range of what this connection will really
    fetch: a first window while the size is unknown, then a share of what is left.
    """
    if t.opt.connections == 1 or t.sources.pinned is not None:
        return seg.end
    if seg.end is None:
        return start + t.opt.first_request
    if not t._splittable_locked():
        return seg.end
    # The most this transfer may run soon: what the ramp settled on, or its next step.
    workers = max(t.active_workers, t.opt.connections or t.planned_workers or t.opt.max_connections)
    settled = t.opt.connections is not None or t.planned_workers == t.worker_limit is not None  # none is coming
    return t.schedule.request_end(seg, start, remaining=t._remaining() or 0, workers=workers,
                                  smallest=t._smallest_piece(), least=t.opt.request_min,
                                  most=t.opt.request_max, settled=settled)


def accept_answer(t, answer: Answer, seg: Segment, src: Source, asked: int | None = None) -> bool:
    """Take in what an accepted answer tells: size, validators, a shorter range.

    Returns True when it pinned the transfer to one stream from ``src``.
    """
    with t.lock:
        if t.algorithm is None and not (src.etag or src.last_modified):
            clash = t.sources.validator_clash(src, answer.etag, answer.last_modified)
            if clash:
                raise SourceBad(clash)
        if answer.whole_body and t.size is None:
            t.ranges_ok = False  # a Range probe answered with the whole body: no range support
            t.dirty = True
        if src.learn(answer.etag, answer.last_modified):
            t.dirty = True
        pin = (t.algorithm is None and not (src.etag or src.last_modified) and t.sources.pinned is None
               and answer.total is not None and (t.size is None or answer.whole_body))
        if pin:
            # Nothing can check this file (no hash, no validator): pieces from several
            # requests could come from servers holding different versions. One stream.
            t.sources.pinned = src
        if t.size is None:
            t.size = answer.total
            if answer.total is not None:
                seg.end = answer.total if seg.end is None else min(seg.end, answer.total)
                if t.schedule.piece and t.ranges_ok:  # (never inside the range asked)
                    t.schedule.cut(seg, max(t.schedule.piece_size(), (answer.end or 0) - seg.pos))
                t._preallocate_locked()
                t.wake.notify_all()  # the main loop opens the others now, not up to 50 ms later
            t.dirty = True
        if answer.first > seg.pos and seg.end is not None:
            # The answer starts later than asked (honestly): the gap goes back to the schedule.
            t.schedule.add(seg.pos, answer.first)
            seg.pos = seg.start = answer.first
        if answer.end is not None and seg.end is not None and answer.end < min(seg.end, asked or seg.end):
            # The server sent a shorter range than asked: leave the rest to others.
            t.schedule.add(answer.end, seg.end)
            seg.end = answer.end
        return pin
