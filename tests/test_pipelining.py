"""HTTP/1.1 pipelining (issue 20): a connection's next request goes out before its answer ends.

``engine/ahead.py`` decides the next request while the answer being read nears its end and
``net/pipeline.py`` writes it on the same direct connection; its answer is read from the same
reader. Real servers on 127.0.0.1: nginx behind a latency proxy (requests per ``$connection``,
the file exact, every byte served once), and a scripted range server that holds the last bytes
of each answer until the next request arrives (so it sees which requests came early, and the
next answer's first bytes share a write, and the client's read buffer, with the last one's
tail), that closes a connection after each answer, or answers a pipelined request wrongly.
"""

from __future__ import annotations

import hashlib
import random
import re
import select
import socket
import threading
import time

import pytest

from prefetch.engine.options import TransferOptions
from prefetch.errors import InterruptedTransferError
from prefetch.engine.transfer import download_to_part
from prefetch.net import pipeline
from prefetch.net.http import Timeouts
from tests.latency_proxy import LatencyProxy
from tests.keepalive import Listener
from tests.nginx import NginxServer, nginx_binary

KiB, MiB = 1 << 10, 1 << 20
DATA = random.Random(2020).randbytes(2 * MiB + 4321)
_RANGE = re.compile(rb"\r\nRange: bytes=(\d+)-(\d*)", re.I)


class RangeServer(Listener):
    """Answers ranged GETs for ``data`` after ``delay`` seconds (a route's round trip), keeping
    connections alive (HTTP/1.1, no ``Connection: close``).

    ``hold``: the last ``_TAIL`` bytes of each answer wait until the connection's next request
    arrives (up to ``_HOLD`` seconds); a request that arrives while they wait is ``early`` (sent
    ahead) and its answer goes out with them in one write. ``mode``: ``"ok"``; ``"close"`` closes
    each connection after its first answer; ``"wrong"`` answers an early request with a range
    starting 1000 bytes later than asked; ``"503"`` answers an early request 503.
    """

    _TAIL = 1000
    _HOLD = 0.3

    def __init__(self, data: bytes, *, mode: str = "ok", hold: bool = True, delay: float = 0.01,
                 on_early=None) -> None:
        self.data, self.mode, self.hold, self.delay = data, mode, hold, delay
        self.on_early = on_early  # called when a request arrives early
        self.seen: list[tuple[int, int, bool]] = []  # (connection, request number on it, early)
        self.served = 0  # body bytes sent
        self.served_early = 0  # of which in answers to requests that arrived early
        self.listen()
        self.url = f"http://127.0.0.1:{self.port}/file.bin"

    @property
    def key(self) -> tuple:
        return ("http", "127.0.0.1", self.port)

    def _answer(self, head: bytes, early: bool) -> bytes:
        match = _RANGE.search(head)
        size = len(self.data)
        first, last = (int(match.group(1)), int(match.group(2) or size - 1)) if match else (0, size - 1)
        if early and self.mode == "503":
            return b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
        if early and self.mode == "wrong":
            first = min(first + 1000, last)
        last = min(last, size - 1)
        body = self.data[first:last + 1]
        self.served += len(body)
        self.served_early += len(body) if early else 0
        status = b"206 Partial Content" if match else b"200 OK"
        return (b"HTTP/1.1 %s\r\nContent-Length: %d\r\nContent-Range: bytes %d-%d/%d\r\nETag: \"v1\"\r\n\r\n%s"
                % (status, len(body), first, last, size, body))

    def _serve(self, conn: socket.socket, number: int) -> None:
        pending, tail, count = b"", b"", 0
        with conn:
            while True:
                while b"\r\n\r\n" not in pending:
                    if tail and not select.select([conn], [], [], self._HOLD)[0]:
                        conn.sendall(tail)  # nothing came early: the rest now
                        tail = b""
                        continue
                    try:
                        chunk = conn.recv(65536)
                    except OSError:
                        return
                    if not chunk:
                        return
                    pending += chunk
                head, _, pending = pending.partition(b"\r\n\r\n")
                count += 1
                early = bool(tail)
                self.seen.append((number, count, early))
                if early and self.on_early is not None:
                    self.on_early()
                head, tail = self._before(head, tail, early)
                try:
                    tail = self._send(conn, tail + self._answer(head, early), tail, early)
                except OSError:
                    return
                if tail is None:
                    return

    def _before(self, head: bytes, tail: bytes, early: bool) -> tuple[bytes, bytes]:
        """The request's head and the held tail of the answer before, as this server answers them."""
        if not early:
            time.sleep(self.delay)
        return head, tail

    def _send(self, conn: socket.socket, out: bytes, tail: bytes, early: bool) -> bytes | None:
        """Send ``out`` (the held tail, then this answer); the tail now held, None: close."""
        if self.mode == "close" or not self.hold:
            conn.sendall(out)
            return None if self.mode == "close" else b""
        conn.sendall(out[:-self._TAIL])
        return out[-self._TAIL:]


def options(**overrides) -> TransferOptions:
    values = dict(connections=2, first_request=256 * KiB, request_min=256 * KiB, request_max=256 * KiB,
                  min_split=64 * KiB, backoff_base=0.01, backoff_cap=0.05, timeouts=Timeouts(connect=5, read=5))
    values.update(overrides)
    return TransferOptions(**values)


def download(tmp_path, url, opts=None, data=DATA):
    part = tmp_path / "file.bin.part"
    result = download_to_part(urls=[url], part=part, state_file=tmp_path / "file.bin.part.json",
                              algorithm="sha256", options=opts or options())
    assert part.read_bytes() == data
    assert result.digest == hashlib.sha256(data).hexdigest()
    return result


def test_the_next_request_goes_out_before_the_answer_ends_and_reads_from_the_same_buffer(tmp_path):
    server = RangeServer(DATA)
    try:
        download(tmp_path, server.url)
    finally:
        server.close()
    early = [seen for seen in server.seen if seen[2]]
    # Requests came while the answer before them still had its last bytes to send: their
    # answers' heads went out in the same write as that tail (read from the same buffer).
    assert len(early) >= 2
    assert len({conn for conn, _, _ in server.seen}) <= 2  # on the (at most) two connections, kept alive
    assert server.served == len(DATA)  # every byte served once
    assert not pipeline.refused(server.key)


def test_a_stop_while_a_request_is_sent_ahead_leaves_a_part_that_resumes_exact(tmp_path):
    """The transfer stops while a request sent ahead is on its way: its connection is closed
    with it, nothing of its answer reaches the ``.part``, and the resumed file is exact."""
    stop = threading.Event()
    server = RangeServer(DATA, on_early=stop.set)
    part = tmp_path / "file.bin.part"
    try:
        with pytest.raises(InterruptedTransferError):
            download_to_part(urls=[server.url], part=part, state_file=tmp_path / "file.bin.part.json",
                             algorithm="sha256", options=options(), stop=stop)
        assert any(early for _, _, early in server.seen)
        result = download(tmp_path, server.url)
    finally:
        server.close()
    assert result.downloaded < len(DATA)  # (resumed: the bytes kept before the stop were not fetched again)


@pytest.mark.parametrize("mode", ["close", "wrong", "503"])
def test_a_server_that_fails_a_pipelined_request_costs_one_retry_and_no_more_pipelining(tmp_path, mode):
    """A server that closes after each answer (without saying so), or answers a request sent
    ahead with another range or a 503: the file is still exact, the request is sent again on
    a fresh connection, and the host gets no more pipelining."""
    server = RangeServer(DATA, mode=mode)
    try:
        download(tmp_path, server.url)
    finally:
        server.close()
    assert pipeline.refused(server.key)  # the fallback was taken
    early = [seen for seen in server.seen if seen[2]]
    if mode != "close":
        # One failure (on each connection at most: both may have sent ahead before the first
        # answer came back), then no request is sent ahead to that host.
        assert 1 <= len(early) <= 2
        assert len(server.seen) > 2 * len(early) + 2
        # Only what was answered to the requests sent ahead was served past the file's bytes
        # (a 503 has no body; a wrong answer is the window that request asked for: at most
        # request_max, or the rest of its piece where a window would leave a runt).
        assert server.served - len(DATA) <= (server.served_early if mode == "wrong" else 0)


@pytest.mark.skipif(nginx_binary() is None, reason="nginx not installed")
def test_nginx_behind_a_long_route_serves_pipelined_requests_on_the_same_connections(tmp_path):
    """nginx 300 ms away (the proxy paces each connection at 1 MiB/s): the requests sent ahead
    are answered as asked on the connections they were sent on (nginx's ``$connection``), the
    file is exact and every byte is served once."""
    data = DATA[: 2 * MiB]
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "file.bin").write_bytes(data)
    window = dict(first_request=512 * KiB, request_min=512 * KiB, request_max=512 * KiB)
    key = None
    with NginxServer(tmp_path / "www") as nginx, LatencyProxy(nginx.port, rtt=0.3, pace=MiB) as proxy:
        download(tmp_path, proxy.url_for("file.bin"), options(**window), data)
        key = ("http", "127.0.0.1", proxy.port)
        requests = [r for r in nginx.requests_once_served(len(data)) if r[4] in (200, 206)]
    by_connection: dict[int, list] = {}
    for conn, number, *_ in requests:
        by_connection.setdefault(conn, []).append(number)
    assert len(requests) - len(by_connection) >= 2  # the requests reuse their connections ...
    assert all(sorted(numbers) == list(range(1, len(numbers) + 1)) for numbers in by_connection.values())
    assert sum(r[5] for r in requests) == len(data)  # ... and every byte is served once
    assert pipeline.answered(key) >= 2 and not pipeline.refused(key)  # sent ahead, answered as asked


@pytest.mark.skipif(nginx_binary() is None, reason="nginx not installed")
def test_a_connection_refused_and_waiting_to_retry_does_not_hold_the_others_requests_back(tmp_path):
    """A mirror that serves two connections per client and answers 503 beyond (the latency
    proxy's ``max_open``), 50 ms away, each connection paced at 1 MiB/s: of the four the transfer
    opens, two are refused; the first refusal is retried after the backoff (5 s here, longer than
    the whole download), the second taken as the cap. The one waiting out its backoff has no
    request out: the two that deliver still send their next requests ahead (waiting for its
    first answer, as before, they sent none until it woke: a round trip idle per connection),
    every one of them (it is the one to step back, not they)."""
    data = DATA[: 3 * MiB]
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "file.bin").write_bytes(data)
    opts = options(connections=None, initial_connections=4, max_connections=4, long_route_connections=4,
                   piece_size=256 * KiB, first_request=256 * KiB, request_max=512 * KiB,
                   backoff_base=5.0, backoff_cap=5.0)
    with NginxServer(tmp_path / "www") as nginx, \
            LatencyProxy(nginx.port, rtt=0.05, pace=MiB, max_open=2) as proxy:
        download(tmp_path, proxy.url_for("file.bin"), opts, data)
        key = ("http", "127.0.0.1", proxy.port)
        requests = [r for r in nginx.requests_once_served(len(data)) if r[4] in (200, 206)]
    assert proxy.rejected >= 1  # (a fifth connection's refusal: the case at hand)
    assert pipeline.answered(key) >= 2 and not pipeline.refused(key)  # requests were sent ahead meanwhile
    # The proxy's view: every request after a connection's first arrived while the answer before
    # it was still on its way, all through the download. (The worker waiting out its backoff
    # counted as one to step back, and a delivering connection's request ahead, decided while
    # it waited, was given up for that answer: with the second refusal, for every answer after.)
    later = [early for _, number, early in proxy.requests if number > 1]
    assert len(later) >= 4 and all(later), proxy.requests
    assert sum(r[5] for r in requests) == len(data)  # every byte served once


@pytest.mark.parametrize("how", ["file-url", "path"])
def test_a_local_copy_is_never_wrapped_for_pipelining(home, tmp_path, monkeypatch, how):
    """A local source's answer (net/local.py) has no connection: even where every route counts
    as long enough to pipeline on (a loaded machine's local answers can take 3 ms and more),
    a local copy goes as before. It was an internal error for every local file in a CI run."""
    import prefetch.engine.ahead as ahead
    from prefetch.flow.planning import run_request
    from prefetch.flow.request import GetRequest

    monkeypatch.setattr(ahead, "_MIN_ROUND_TRIP", 0.0)
    data = random.Random(7).randbytes(6 * MiB + 123)
    source = tmp_path / "src" / "local.bin"
    source.parent.mkdir()
    source.write_bytes(data)
    name = source.as_uri() if how == "file-url" else str(source)
    request = GetRequest(names=[], urls=[{"url": name}], output_dir=str(tmp_path / "out"))
    results = run_request(request)
    assert [r.status for r in results] == ["downloaded"], results
    assert (tmp_path / "out" / "local.bin").read_bytes() == data
