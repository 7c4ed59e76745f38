"""A request on the file's own thread ("inline"): the size of answer read there, its reused
read buffer, and the one stop watch for every such request of the process.

A small file's one request runs on the thread that runs the file (``Fetcher.first_inline``,
``single.py``), with no worker thread; nothing else watches that thread, so a stop is seen
by :func:`watch_inline`'s booking on the shared deadline watchdog, which aborts the answer
or the socket a head is awaited on.
"""

from __future__ import annotations

import threading

INLINE_BODY = 256 << 10  # an answer this short is read on the file's own thread (Fetcher.run(inline=True))
WATCH = 0.25  # seconds between looks at the stop while a request runs on the file's own thread
_buffers = threading.local()  # a read buffer per thread that runs files inline (a pool thread goes from file to file)

_inline_lock = threading.Lock()
_inline: dict = {}  # thread id -> the transfer whose request runs inline on it
_inline_watched = [False]  # a look at them is booked on the deadline watchdog


def thread_buffer(size: int) -> memoryview:
    """This thread's reused read buffer for a request run inline (a fresh 512 KiB one per small
    file costs page faults; a pool thread goes from file to file)."""
    buffer = getattr(_buffers, "view", None)
    if buffer is None or len(buffer) != size:
        buffer = _buffers.view = memoryview(bytearray(size))
    return buffer


def drop_thread_buffer() -> None:
    """This thread's buffer went to another thread with the answer it holds: take a fresh one next."""
    _buffers.view = None


def watch_inline(t):
    """While a request of transfer ``t`` runs inline, a stop aborts it (the head wait or the
    body); returns the function that ends the watch. One watch for every inline request of
    the process (a booking per file cost more than the rest of the engine's bookkeeping).
    ``t`` needs ``stop``, ``lock`` and ``responses`` (the answers to abort)."""
    ident = threading.get_ident()
    with _inline_lock:
        _inline[ident] = t
        if not _inline_watched[0]:
            from prefetch.net.deadlines import call_at

            _inline_watched[0] = True
            call_at(WATCH, _watch_inline)

    def end() -> None:
        with _inline_lock:
            _inline.pop(ident, None)
    return end


def _watch_inline() -> None:
    """On the watchdog thread every ``WATCH`` seconds while requests run inline: a stopped
    transfer's response is aborted, or the socket its request waits on for the head."""
    from prefetch.net.open_socket import abort_head
    from prefetch.net.deadlines import call_at

    with _inline_lock:
        running = list(_inline.items())
        if not running:
            _inline_watched[0] = False
            return
    for ident, t in running:
        if t.stop.is_set():
            with t.lock:
                responses = list(t.responses.values())
            for resp in responses:
                resp.abort()
            abort_head(ident)
    call_at(WATCH, _watch_inline)
