"""The bulk lane's wire: many small files from one near host, their GETs pipelined on a few
kept-alive connections, read on one thread (issue 19's loopback row).

``flow/file_batch.py`` hands :func:`fetch_pipelined` a chunk of fresh small files of one host
(``host.route.near``, learned from the run's first files through the usual path) with their
locks held. One thread writes up to ``DEPTH`` requests ahead on each of up to ``CONNECTIONS``
connections (each a slot of the host's connection budget: :meth:`Host.try_lease` and
:meth:`Host.try_admit`, as a transfer's worker takes them), reads the answers in order and
gives ``take`` an answer only when:

* its head is strict HTTP/1.1 (a status line, ``Name: value`` lines, a ``Content-Length``,
  no ``Transfer-Encoding``), its body exactly that long;
* the answer after it on the same connection begins with a head that parses, or nothing
  follows it (an answer whose body ran short of its length swallows the next head: the
  next "head" is then garbage and the answer before it is not kept);
* ``check_response`` (the transfer's own check, as ``single._ask`` calls it) accepts it as
  the whole file in one answer of at most ``INLINE_BODY``: web pages, text for binary, a
  ``Content-Encoding``, a 206 of another range are refused exactly as there.

A refused answer that kept the connection in step (a 404, a redirect, a page, a 206 of the
wrong range) hands that one file back (``flow/files.fetch_file`` fetches it again: at most
one extra request; with ``first_refusal_ends``, ``--fail-fast``'s, it also ends the chunk's
requests: its file may fail the run); anything out of step (garbage, a close or reset with answers owed, a
stall past the read timeout, answers still owed ``OWED_SECONDS`` after the chunk's last
request, a ``Transfer-Encoding``, a ``Connection: close`` before ``DEPTH`` answers on a
connection), a 429, 503 or other 5xx (the host's
cap and ``given_up`` are the usual path's business: a 429 or 503 is reported to the host,
``Host.refused``, which lowers its cap), or a stop ends the lane for the chunk and hands back
every file not yet taken; trouble also turns the lane off for the host (``Host.bulk``) for the
rest of the run, and a host that ever refused a connection never gets the lane. A connection
starts with ``FIRST_DEPTH`` requests ahead, one more with each answer taken, up to ``DEPTH``:
a server that refuses or breaks at once costs a few requests, not a connection's worth.
``http://`` and ``https://``, direct (no proxy, credentials or cookies): the connections are
the engine's own sockets (``net/direct.py``; TLS with the run's CA bundle, ``net/tls_context.py``),
read without blocking: a TLS socket's ``recv`` that needs more of a record says so
(``SSLWantReadError``) and is read again when the socket is readable; a TLS connection that ends
without its close_notify, or any TLS error, is a connection ending out of step.
"""

from __future__ import annotations

import os
import selectors
import ssl
import time
from collections import deque
from urllib.parse import urlsplit

from prefetch.engine.bulk_head import OutOfStep, parse_head
from prefetch.engine.inline import INLINE_BODY
from prefetch.fs.processes import thread_times

CONNECTIONS = 2  # connections per chunk (one thread: the second overlaps the server's work)
DEPTH = 8  # requests written ahead on each connection ...
FIRST_DEPTH = 2  # ... from this many at first, doubling with each answer taken (a server that refuses the
# lane, 429/503, or answers out of step costs a few requests, not a connection's worth)
CHUNK_SECONDS = 0.5  # no new request after this long: the chunk is placed (a kill loses at most this much)
OWED_SECONDS = 1.0  # ... and answers still owed this long after that go the usual way (a slow drip of one
# answer held the chunk's files unplaced for as long as it lasted; a stop then discarded them all)
IDLE = 0.5  # a chunk that waited on the wire more than this share of its time: the lane is off for the host
# (its time in select less its thread's wait for a CPU: a loaded machine's, not the wire's; see ``idle``)
PER_CONNECTION = 400  # requests on one connection before a fresh one (nginx closes at keepalive_requests)


def enabled(env=None) -> bool:
    """``PREFETCH_BULK`` (on unless 0/no/false/off): the lane may run."""
    value = (os.environ if env is None else env).get("PREFETCH_BULK", "1")
    return value.strip().lower() not in ("0", "no", "false", "off")


def host_ready(host, options, *, judged: bool = True) -> bool:
    """The lane may run for ``host``'s files now: a near host, not given up, that never refused a
    connection (429/503: its cap is the usual path's to manage), no trouble met, no rate limit.
    ``judged=False``: all that but the nearness (which the host's first answer tells)."""
    return (host is not None and getattr(host, "bulk", False) and (host.route.near or not judged)
            and not host.given_up and not host.refusals and options.limiter is None)


def direct_url(url: str, known: dict | None = None) -> bool:
    """``url`` is ``http://`` or ``https://`` that the engine's client would send on its own
    socket (``Client._route``: no proxy, no credentials, no cookies). ``known``: a run's answers
    by scheme and host (the environment is read once per host: https and http have each their
    proxy variable)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return False
    from prefetch.net.direct import plain_url

    if not plain_url(url):
        return False
    where = scheme.lower() + "://" + rest.split("/", 1)[0]
    answer = None if known is None else known.get(where)
    if answer is None:
        from prefetch.net.checks import netrc_named
        from prefetch.net.proxies import proxy_for

        answer = proxy_for(url) is None and not netrc_named()
        if known is not None:
            known[where] = answer
    return answer


class _Conn:
    """One connection: the jobs whose requests went out on it, in order, and its unread bytes."""

    def __init__(self, raw, client, pools, tls: bool) -> None:
        self.raw, self.client, self.pools = raw, client, pools  # (net.direct_conn.Connection, its lent client)
        self.sock = raw.sock
        self.sent: deque = deque()
        self.buf = bytearray()
        self.asked = 0
        self.held = None  # (job, head): an answer read whole, kept once the next head proves it in step
        self.last = time.monotonic()
        self.closing = False  # an answer said Connection: close
        self.tls = tls


def fetch_pipelined(host, jobs: list, *, options, stop, take, first_refusal_ends: bool = False) -> tuple[list, set]:
    """Fetch ``jobs`` (``(key, url, name, hashed)``, all of ``host``) and call ``take(job, head,
    answer)`` for each answer accepted (see the module docstring; ``head.body`` is its bytes); a
    False from ``take`` hands that file back. Returns the jobs not taken, in order, and the keys
    of those never asked for (after ``CHUNK_SECONDS`` no new request goes out: the caller places
    what came and may offer those again).

    A chunk that spent more than ``IDLE`` of its time waiting for answers (a server that sends
    slowly: more files in flight on more connections do better there) turns the lane off for
    the host; its thread's wait for a CPU is not counted as such (:func:`idle`)."""
    from prefetch.engine.response_check import check_response
    from prefetch.engine.sources import Source
    from prefetch.net.direct import merged_headers
    from prefetch.net.http import _HEADERS
    from prefetch.net.write_head import request_head

    parts = urlsplit(jobs[0][1])
    scheme = parts.scheme.lower()
    hostname, port = parts.hostname, parts.port or (443 if scheme == "https" else 80)
    key = (scheme, hostname, port)
    # (an http chunk never touches ssl: ``cli.defer_import`` keeps its ~7 ms import out of such a run)
    waits = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError) if scheme == "https" else BlockingIOError
    ask_end = min(options.first_request, INLINE_BODY)
    headers = merged_headers(_HEADERS, {**options.headers, "Range": f"bytes=0-{ask_end - 1}"})
    timeouts = options.timeouts
    queue = deque(jobs)
    taken = set()
    asked: dict = {}  # job key -> when its request went out
    began = time.monotonic()
    clock = thread_times()  # (this thread's CPU and run-queue seconds so far: see ``idle``)
    waited = 0.0  # seconds in select without an answer to read
    depth = [FIRST_DEPTH]  # requests ahead on a connection now (up to DEPTH as answers are taken)
    ended = [False]  # an answer handed back with ``first_refusal_ends`` (--fail-fast): no new request
    admitted = [0]  # of the host's connections, those this lane counts as in use (Host.admit)
    sel = selectors.DefaultSelector()
    slots = 0
    conns: list[_Conn] = []

    def open_conn() -> _Conn:
        """A connection of the host's: a warm one of its idle clients' (kept alive from the files
        before), else a new one; it goes back warm when the chunk leaves it clean (``put_back``)."""
        client = host.client(timeouts=timeouts, resolve=options.resolve)
        try:
            pools = client._open(True)  # (the lent client's direct pools: no proxy here)
            raw = pools._take(key)
            if raw is not None and (raw.reader is not None or raw.queued is not None):
                raw.close()
                raw = None
            if raw is None:
                raw = pools._new(key, timeouts.connect)
        except BaseException:
            client.close()
            raise
        raw.sock.setblocking(False)
        conn = _Conn(raw, client, pools, scheme == "https")
        sel.register(raw.sock, selectors.EVENT_READ, conn)
        conns.append(conn)
        return conn

    def fill(conn: _Conn) -> None:
        heads = []
        now = time.monotonic()
        if now - began > CHUNK_SECONDS or ended[0]:
            return
        while queue and len(conn.sent) < depth[0] and conn.asked < PER_CONNECTION and not conn.closing:
            job = queue.popleft()
            url = urlsplit(job[1])
            target = (url.path or "/") + (f"?{url.query}" if url.query else "")
            heads.append(request_head("GET", target, hostname, port, scheme, headers))
            conn.sent.append(job)
            asked[job[0]] = now
            conn.asked += 1
        if heads:
            conn.last = now
            data = b"".join(heads)
            try:
                sent = conn.sock.send(data)  # (a few hundred bytes each: the socket's buffer takes them)
            except waits:
                sent = 0
            if sent < len(data):
                conn.sock.settimeout(timeouts.read)
                try:
                    conn.sock.sendall(data[sent:])
                finally:
                    conn.sock.setblocking(False)

    def drop(conn: _Conn, *, clean: bool = False) -> None:
        """Done with ``conn``: its answers owed go back to the queue's front (asked again on
        another connection, or handed back); kept warm for the next files when ``clean``."""
        if conn.held is not None:
            conn.sent.appendleft(conn.held[0])
            conn.held = None
        for job in reversed(conn.sent):
            queue.appendleft(job)
        sel.unregister(conn.sock)
        conns.remove(conn)
        if clean and not conn.sent and not conn.buf and not conn.closing:
            conn.sock.settimeout(timeouts.read)
            conn.pools.put(conn.raw)  # (warm, for the next chunk or the usual path's next file)
        else:
            conn.raw.close()
        conn.sent.clear()
        conn.client.close()

    def judge(conn: _Conn) -> None:
        """The held answer is in step: take it or hand its file back."""
        job, head = conn.held
        conn.held = None
        if head.status in (429, 503):
            admitted[0] -= 1
            host.refused(head.status)  # (the host's cap comes down as for the usual path's refused request)
            raise _Crowded
        if head.status >= 500:
            raise _Crowded
        try:
            answer = check_response(head, start=0, known_size=None, src=Source(job[1]), ranged=True, others=False,
                                    have_bytes=False, name=job[2], end=ask_end, hashed=job[3])
        except Exception:  # noqa: BLE001 - refused as the single path refuses it: the usual path asks again
            answer = None
        if (answer is not None and answer.total is not None and not answer.first and not answer.skip
                and answer.end == answer.total and answer.total <= INLINE_BODY and len(head.body) == answer.total
                and take(job, head, answer)):
            taken.add(job[0])  # (any other: handed back, not in ``taken``)
            if depth[0] < DEPTH:
                depth[0] += 1
        elif first_refusal_ends:
            ended[0] = True  # (its file may fail the run: the usual path starts nothing after a failure)

    def read(conn: _Conn) -> None:
        data, closed = receive(conn)
        if data:
            frame(conn, data)
        if closed:
            if conn.closing or (not conn.sent and not conn.buf):
                conn.closing = True  # (closed as announced, or with nothing owed: dropped, its owed asked again)
                if conn.held is not None:
                    judge(conn)
                return
            raise OutOfStep("closed with answers owed")

    def receive(conn: _Conn) -> tuple[bytes, bool]:
        """The bytes the connection has for us now, and whether it ended after them. A TLS recv
        gives one record (16 KiB at most): every record already here is taken, so that none
        waits in the TLS layer where the selector cannot see it."""
        chunks = []
        while True:
            try:
                chunk = conn.sock.recv(1 << 20)
            except waits:
                return b"".join(chunks), False
            if not chunk:
                return b"".join(chunks), True
            if not conn.tls:
                return chunk, False  # (plain: one recv per readiness)
            chunks.append(chunk)

    def frame(conn: _Conn, data: bytes) -> None:
        conn.last = time.monotonic()
        buf = conn.buf
        buf += data
        at = 0  # (the answers read are cut from the buffer once per receive, not each: no memmove per answer)
        try:
            while conn.sent:
                parsed = parse_head(buf, at)
                if parsed is None:
                    return
                head, body = parsed
                if conn.held is not None:
                    judge(conn)  # the answer before is followed by a head that parses: it ended in step
                length = int(head.headers["content-length"])
                if length > INLINE_BODY:
                    raise OutOfStep("a body longer than the lane reads")
                if len(buf) < body + length:
                    return
                head.body = bytes(buf[body:body + length])
                at = body + length
                job = conn.sent.popleft()
                head.elapsed = conn.last - asked.pop(job[0], conn.last)
                conn.held = (job, head)
                if head.close:  # the last answer on this connection: nothing may follow it
                    conn.closing = True
                    break
        finally:
            if at:
                del buf[:at]
        if buf:
            raise OutOfStep("bytes beyond the answers asked for")
        if conn.held is not None:
            judge(conn)  # nothing follows the last answer owed

    try:
        for _ in range(min(CONNECTIONS, -(-len(jobs) // DEPTH))):
            if not host.try_lease():
                break
            if not host.try_admit():
                host.release()
                break
            slots += 1
            admitted[0] += 1
            fill(open_conn())
        while (conns or queue) and slots:
            if stop.is_set():
                break
            if not any(c.sent or c.held for c in conns) and (not queue or ended[0]
                                                            or time.monotonic() - began > CHUNK_SECONDS):
                break  # (nothing owed, and nothing more to ask in this chunk)
            for conn in list(conns):
                if conn.closing and conn.asked - len(conn.sent) < DEPTH:
                    # (a server that closes after a few answers: a connection a file or two, the usual path's pace)
                    raise OutOfStep("closes its connections after a few answers")
                if conn.closing or (not conn.sent and (not queue or conn.asked >= PER_CONNECTION)):
                    drop(conn, clean=not queue and not conn.closing)
                    if queue:
                        fill(open_conn())
            if not conns:
                if not queue:
                    break
                fill(open_conn())
            looked = time.monotonic()
            events = sel.select(0.25)
            waited += time.monotonic() - looked
            for ready, _ in events:
                read(ready.data)
                if not ready.data.closing:
                    fill(ready.data)
            now = time.monotonic()
            if any(c.sent and now - c.last > timeouts.read for c in conns):
                raise OutOfStep("stalled")
            if now - began > CHUNK_SECONDS + OWED_SECONDS and any(c.sent for c in conns):
                raise OutOfStep("answers owed past the chunk's time")  # (a drip: the rest is placed now)
    except _Crowded:
        host.bulk = False
    except (OutOfStep, OSError):
        host.bulk = False
    finally:
        for conn in list(conns):
            if conn.held is not None:  # (its answer is not proven in step: not kept)
                conn.sent.appendleft(conn.held[0])
                conn.held = None
            drop(conn, clean=True)  # (kept warm only when nothing is owed on it and nothing unread)
        sel.close()
        for _ in range(slots):
            host.release()
        for _ in range(max(0, admitted[0])):
            host.dismiss()
    took = time.monotonic() - began
    if took > 0.1 and idle(waited, clock, thread_times()) > IDLE * took:
        host.bulk = False  # (the wire, not this thread, sets the pace: the usual path's files overlap it)
    return [job for job in jobs if job[0] not in taken], {job[0] for job in queue}


def idle(waited: float, before: tuple[float, float] | None, after: tuple[float, float] | None) -> float:
    """Of a chunk's ``waited`` seconds in select, those the wire kept it waiting: less the seconds
    its thread waited, runnable, for a CPU meanwhile (``fs.processes.thread_times`` at the chunk's
    start and end; all of them: the thread spends most of its time in select). On a machine whose
    CPUs other work holds (a notebook that also trains: load 12-22 on 2 cores) an answer already
    in the socket waits for the thread to be scheduled, and that wait counted as the wire's: the
    lane turned itself off for the host after a chunk or two (2,000 files, 1,024 through it), and
    the usual path's threads then waited for the same CPU, one request per file. A server whose
    answers come late keeps the thread asleep in select, off the run queue: that still counts.
    Where the kernel keeps no schedstat, all of ``waited``."""
    if before is None or after is None:
        return waited
    return max(0.0, waited - (after[1] - before[1]))


class _Crowded(Exception):
    """A 429 or a 5xx: the host's cap and retries are the usual path's."""
