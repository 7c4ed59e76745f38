"""A request on a kept-alive connection skips urllib3's urlopen (net/direct.py's warm path):
what goes out, what comes back and what fails must be what urlopen sends, returns and raises.

A raw server on 127.0.0.1 keeps each connection open, records every request's bytes as they
arrived, and answers what the test tells it to.
"""

from __future__ import annotations

import socket
import threading

import pytest
from urllib3.connectionpool import HTTPConnectionPool

from prefetch.errors import NetworkError
from prefetch.net.failures import TransientHTTPError
from prefetch.net.http import Client, Timeouts, open_url

QUICK = Timeouts(connect=3, read=3)
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"e1\"\r\n\r\nhello"


class _KeepAlive:
    """Answers each request on a connection in turn with ``answers[i]`` (the last one again
    after them); ``None`` closes the connection without answering. Records (connection number,
    raw request head)."""

    def __init__(self, answers: list[bytes | None]) -> None:
        self.answers = answers
        self.seen: list[tuple[int, bytes]] = []
        self.served = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        number = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            number += 1
            threading.Thread(target=self._serve, args=(conn, number), daemon=True).start()

    def _serve(self, conn: socket.socket, number: int) -> None:
        pending = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in pending:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    pending += chunk
                head, _, pending = pending.partition(b"\r\n\r\n")
                self.seen.append((number, head + b"\r\n\r\n"))
                answer = self.answers[min(self.served, len(self.answers) - 1)]
                self.served += 1
                if answer is None:
                    return
                conn.sendall(answer)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def urlopens(monkeypatch):
    """How many requests went through urllib3's urlopen (the rest took the warm path)."""
    calls = []
    real = HTTPConnectionPool.urlopen

    def counted(self, *args, **kwargs):
        calls.append(args[:2])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(HTTPConnectionPool, "urlopen", counted)
    return calls


def _get(client, url, headers=None) -> tuple[bytes, object]:
    resp, _ = open_url(client, url, headers=headers)
    try:
        return resp.read(), resp.headers
    finally:
        resp.close()


@pytest.mark.parametrize("headers", [None, {"Range": "bytes=0-1048575", "If-Range": "\"e1\"",
                                            "Authorization": "Bearer t0k", "X-Extra": "a b"}],
                         ids=["plain", "range-and-given-headers"])
def test_a_warm_request_sends_the_bytes_urlopen_sends(urlopens, headers):
    server = _KeepAlive([OK])
    try:
        with Client(timeouts=QUICK) as client:
            for name in ("a.bin", "a.bin", "dir/b.bin?x=1&y=2"):
                body, _ = _get(client, f"{server.base}/{name}", headers)
                assert body == b"hello"
    finally:
        server.close()
    assert [number for number, _ in server.seen] == [1, 1, 1]  # one connection, kept alive
    assert len(urlopens) == 1  # only the first request (a new connection) went through urlopen
    first, second, third = (head for _, head in server.seen)
    assert second == first
    assert third == first.replace(b"GET /a.bin ", b"GET /dir/b.bin?x=1&y=2 ")


def test_a_path_urllib3_would_encode_goes_through_urlopen(urlopens):
    server = _KeepAlive([OK])
    try:
        with Client(timeouts=QUICK) as client:
            _get(client, f"{server.base}/a.bin")
            _get(client, f"{server.base}/x[1].bin")
    finally:
        server.close()
    assert len(urlopens) == 2
    assert server.seen[1][1].startswith(b"GET /x%5B1%5D.bin HTTP/1.1\r\n")


@pytest.mark.parametrize("extra", [b"", b"X-Folded: a\r\n b\r\n", b"X-Latin: \xe9t\xe9\r\n"],
                         ids=["plain", "folded", "latin-1"])
def test_a_warm_answer_s_headers_read_as_urllib3_s(urlopens, extra):
    answer = (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nLink: <a>\r\nlink: <b>\r\n" + extra +
              b"Set-Cookie: k=v; Path=/\r\n\r\nhello")
    server = _KeepAlive([answer])
    try:
        with Client(timeouts=QUICK) as client:
            _, cold = _get(client, f"{server.base}/a.bin")
            _, warm = _get(client, f"{server.base}/a.bin")
    finally:
        server.close()
    assert warm.get("LINK") == cold.get("link") == "<a>, <b>"
    assert list(warm.items()) == list(cold.items()) and list(warm.keys()) == list(cold.keys())
    assert ("content-length" in warm) and warm["Content-Length"] == "5" and len(warm) == len(cold)


def test_a_cookie_from_a_warm_answer_is_sent_back():
    server = _KeepAlive([OK, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nSet-Cookie: k=v; Path=/\r\n\r\nhello"])
    try:
        with Client(timeouts=QUICK) as client:
            for _ in range(3):
                _get(client, f"{server.base}/a.bin")
    finally:
        server.close()
    assert b"\r\nCookie: k=v\r\n" in server.seen[2][1]


def test_conflicting_lengths_on_a_warm_connection_are_refused_as_on_a_new_one():
    bad = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"
    for answers in ([bad], [OK, bad]):  # on a new connection, then on a warm one
        server = _KeepAlive(answers)
        try:
            with Client(timeouts=QUICK) as client:
                with pytest.raises(NetworkError, match="unmatching"):
                    for _ in answers:
                        _get(client, f"{server.base}/a.bin")
        finally:
            server.close()


def test_a_warm_connection_dropped_after_the_request_is_retried_once_on_a_new_one(urlopens):
    server = _KeepAlive([OK, None, OK])  # the second request is read, then the connection closed
    try:
        with Client(timeouts=QUICK) as client:
            assert _get(client, f"{server.base}/a.bin")[0] == b"hello"
            assert _get(client, f"{server.base}/a.bin")[0] == b"hello"
    finally:
        server.close()
    assert [number for number, _ in server.seen] == [1, 1, 2]
    assert len(urlopens) == 2  # the first request and the retry: new connections


def test_a_warm_request_without_an_answer_times_out_as_a_transient_failure():
    server = _KeepAlive([OK, b""])  # the second request is never answered
    try:
        with Client(timeouts=QUICK) as client:
            _get(client, f"{server.base}/a.bin")
            with pytest.raises(TransientHTTPError) as info:
                client.request(f"{server.base}/a.bin", timeouts=Timeouts(connect=3, read=0.3))
            assert info.value.timed_out
            # The connection that timed out is not used again.
            server.answers = [OK]
            server.served = 0
            assert _get(client, f"{server.base}/a.bin")[0] == b"hello"
    finally:
        server.close()
    assert [number for number, _ in server.seen] == [1, 1, 2]


def test_a_header_http_client_refuses_is_refused_on_a_warm_connection_too(urlopens):
    server = _KeepAlive([OK])
    try:
        with Client(timeouts=QUICK) as client:
            _get(client, f"{server.base}/a.bin")
            with pytest.raises(NetworkError):
                _get(client, f"{server.base}/a.bin", {"X-Bad": "a\r\nInjected: 1"})
    finally:
        server.close()
    assert all(b"Injected" not in head for _, head in server.seen)


def test_warm_https_requests_read_whole_files_on_one_verified_connection(tls_origin, urlopens):
    data = bytes(range(256)) * 200
    tls_origin.put("f.bin", data)
    with Client(timeouts=QUICK) as client:
        for start in (0, 1000, 40_000):
            resp, _ = open_url(client, tls_origin.url_for("f.bin"), headers={"Range": f"bytes={start}-"})
            assert resp.status == 206 and resp.read() == data[start:]
            resp.close()
    assert len(urlopens) == 1
    assert len({r.client for r in tls_origin.data_requests("f.bin")}) == 1  # one TLS connection


def test_a_kept_connection_to_a_resolved_name_still_names_the_host_asked_for(monkeypatch):
    """With PREFETCH_RESOLVE, urllib3's connection takes the override address as its host once
    connected: urlopen's later requests on it sent ``Host: 127.0.0.1:port``. The warm path sends
    the name asked for on every request."""
    monkeypatch.setenv("PREFETCH_RESOLVE", "example.test=127.0.0.1")
    server = _KeepAlive([OK])
    port = server.base.rsplit(":", 1)[1]
    try:
        with Client(timeouts=QUICK) as client:
            for _ in range(3):
                assert _get(client, f"http://example.test:{port}/a.bin")[0] == b"hello"
    finally:
        server.close()
    assert [head.split(b"\r\n")[1] for _, head in server.seen] == [f"Host: example.test:{port}".encode()] * 3


def test_urlopen_also_names_the_host_asked_for_with_a_resolve_override(monkeypatch):
    """The same through urlopen (the warm path off): the override is only where to connect,
    so the Host header (and a TLS name) stays the name asked for on every request."""
    import prefetch.net.direct as direct

    monkeypatch.setenv("PREFETCH_RESOLVE", "example.test=127.0.0.1")
    monkeypatch.setattr(direct.DirectPools, "_head", lambda *args: None)
    server = _KeepAlive([OK])
    port = server.base.rsplit(":", 1)[1]
    try:
        with Client(timeouts=QUICK) as client:
            for _ in range(3):
                assert _get(client, f"http://example.test:{port}/a.bin")[0] == b"hello"
    finally:
        server.close()
    assert [head.split(b"\r\n")[1] for _, head in server.seen] == [f"Host: example.test:{port}".encode()] * 3
    assert len({conn for conn, _ in server.seen}) == 1, "one kept-alive connection"
