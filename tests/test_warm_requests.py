"""A direct request (net/direct.py: no requests, no urllib3) on a new or a kept-alive
connection: what goes out, what comes back and what fails must be what requests and urllib3
send, return and raise.

A raw server on 127.0.0.1 keeps each connection open, records every request's bytes as they
arrived, and answers what the test tells it to. The reference is the same request through
requests: the same URL with a "." written ``%2E`` (requests re-quotes an escape, so it takes
that URL, and sends the "." plain).
"""

from __future__ import annotations

import re


import time

import pytest

from prefetch.errors import NetworkError
from prefetch.net.failures import TransientHTTPError
from prefetch.net.http import Client, Timeouts, open_url
from tests.keepalive import KeepAliveServer

QUICK = Timeouts(connect=3, read=3)
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"e1\"\r\n\r\nhello"


def _through_requests(url: str) -> str:
    """``url`` with its last "." escaped: requests sends it, as ``url``."""
    stem, _, ext = url.rpartition(".")
    return f"{stem}%2E{ext}"


def _get(client, url, headers=None) -> tuple[bytes, object]:
    resp, _ = open_url(client, url, headers=headers)
    try:
        return resp.read(), resp.headers
    finally:
        resp.close()


@pytest.mark.parametrize("headers", [None, {"Range": "bytes=0-1048575", "If-Range": "\"e1\"",
                                            "Authorization": "Bearer t0k", "X-Extra": "a b"},
                                     {"User-Agent": None, "accept-encoding": None, "Host": "elsewhere:1"}],
                         ids=["plain", "range-and-given-headers", "defaults-removed"])
def test_direct_requests_new_and_kept_alive_send_the_bytes_requests_sends(headers):
    server = KeepAliveServer([OK])
    try:
        for route in ("direct", "requests"):
            with Client(timeouts=QUICK) as client:
                for name in ("a.bin", "a.bin", "dir/b.bin?x=1&y=2"):
                    url = f"{server.base}/{name}"
                    body, _ = _get(client, url if route == "direct" else _through_requests(url), headers)
                    assert body == b"hello"
                assert (client._session is None) == (route == "direct")
    finally:
        server.close()
    assert [number for number, _ in server.seen] == [1, 1, 1, 2, 2, 2]  # one connection each, kept alive
    direct, through = [head for _, head in server.seen[:3]], [head for _, head in server.seen[3:]]
    assert direct == through
    first, second, third = direct
    assert second == first and third == first.replace(b"GET /a.bin ", b"GET /dir/b.bin?x=1&y=2 ")


def test_a_path_urllib3_would_encode_goes_out_encoded_as_it_would():
    server = KeepAliveServer([OK])
    try:
        with Client(timeouts=QUICK) as client:
            _get(client, f"{server.base}/a.bin")
            _get(client, f"{server.base}/x[1].bin?y=[2]")
            assert client._session is None
        with Client(timeouts=QUICK) as client:
            _get(client, f"{server.base}/x[1]%2Ebin?y=[2]")  # (through requests, then urllib3)
            assert client._session is not None
    finally:
        server.close()
    assert server.seen[1][1].startswith(b"GET /x%5B1%5D.bin?y=%5B2%5D HTTP/1.1\r\n")
    assert server.seen[1][1] == server.seen[2][1]


@pytest.mark.parametrize("extra", [b"", b"X-Folded: a\r\n b\r\n", b"X-Latin: \xe9t\xe9\r\n"],
                         ids=["plain", "folded", "latin-1"])
def test_a_direct_answer_s_headers_read_as_urllib3_s(extra):
    answer = (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nLink: <a>\r\nlink: <b>\r\n" + extra +
              b"Set-Cookie: k=v; Path=/\r\n\r\nhello")
    server = KeepAliveServer([answer])
    try:
        with Client(timeouts=QUICK) as client:
            _, urllib3s = _get(client, _through_requests(f"{server.base}/a.bin"))
            assert type(urllib3s).__name__ == "HTTPHeaderDict"
        with Client(timeouts=QUICK) as client:
            _, cold = _get(client, f"{server.base}/a.bin")  # (the cookie then sends the next through requests:
            client._session.cookies.clear()  # emptied, the next goes direct again, on the kept connection)
            _, warm = _get(client, f"{server.base}/a.bin")
    finally:
        server.close()
    assert [number for number, _ in server.seen] == [1, 2, 2]
    # A folded line on one line, one space for the fold: urllib3 2.8 does it (RFC 9112 5.2); 2.7
    # kept the line break, which the direct path no longer keeps whatever urllib3 is installed.
    unfolded = [(name, re.sub(r"[ \t]*\r\n[ \t]+", " ", value)) for name, value in urllib3s.items()]
    for direct in (cold, warm):
        assert type(direct).__name__ == "Head"
        assert direct.get("LINK") == urllib3s.get("link") == "<a>, <b>"
        assert list(direct.items()) == unfolded and list(direct.keys()) == list(urllib3s.keys())
        assert direct.get("x-folded") == ("a b" if extra.startswith(b"X-Folded") else None)
        assert ("content-length" in direct) and direct["Content-Length"] == "5" and len(direct) == len(urllib3s)


def test_a_cookie_from_a_warm_answer_is_sent_back():
    server = KeepAliveServer([OK, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nSet-Cookie: k=v; Path=/\r\n\r\nhello"])
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
        server = KeepAliveServer(answers)
        try:
            with Client(timeouts=QUICK) as client:
                with pytest.raises(NetworkError, match="unmatching"):
                    for _ in answers:
                        _get(client, f"{server.base}/a.bin")
        finally:
            server.close()


def test_a_warm_connection_dropped_after_the_request_is_retried_once_on_a_new_one():
    server = KeepAliveServer([OK, None, OK])  # the second request is read, then the connection closed
    try:
        with Client(timeouts=QUICK) as client:
            assert _get(client, f"{server.base}/a.bin")[0] == b"hello"
            assert _get(client, f"{server.base}/a.bin")[0] == b"hello"
    finally:
        server.close()
    assert [number for number, _ in server.seen] == [1, 1, 2]  # the retry: a new connection


def test_a_warm_request_without_an_answer_times_out_as_a_transient_failure():
    server = KeepAliveServer([OK, b""])  # the second request is never answered
    try:
        with Client(timeouts=QUICK) as client:
            _get(client, f"{server.base}/a.bin")
            started = time.monotonic()
            with pytest.raises(TransientHTTPError) as info:
                client.request(f"{server.base}/a.bin", timeouts=Timeouts(connect=600, read=0.3))
            assert info.value.timed_out
            assert time.monotonic() - started < 120, "the read timeout, not the connect one (600 s), bounds the answer"
            # The connection that timed out is not used again.
            server.answers = [OK]
            server.served = 0
            assert _get(client, f"{server.base}/a.bin")[0] == b"hello"
    finally:
        server.close()
    assert [number for number, _ in server.seen] == [1, 1, 2]


def test_a_header_http_client_refuses_is_refused_on_a_warm_connection_too():
    server = KeepAliveServer([OK])
    try:
        with Client(timeouts=QUICK) as client:
            _get(client, f"{server.base}/a.bin")
            with pytest.raises(NetworkError):
                _get(client, f"{server.base}/a.bin", {"X-Bad": "a\r\nInjected: 1"})
    finally:
        server.close()
    assert all(b"Injected" not in head for _, head in server.seen)


def test_warm_https_requests_read_whole_files_on_one_verified_connection(tls_origin):
    data = bytes(range(256)) * 200
    tls_origin.put("f.bin", data)
    with Client(timeouts=QUICK) as client:
        for start in (0, 1000, 40_000):
            resp, _ = open_url(client, tls_origin.url_for("f.bin"), headers={"Range": f"bytes={start}-"})
            assert resp.status == 206 and resp.read() == data[start:]
            resp.close()
        assert client._session is None
    assert len({r.client for r in tls_origin.data_requests("f.bin")}) == 1  # one TLS connection


@pytest.mark.parametrize("route", ["direct", "requests"])
def test_a_kept_connection_to_a_resolved_name_still_names_the_host_asked_for(monkeypatch, route):
    """With PREFETCH_RESOLVE, urllib3's connection took the override address as its host once
    connected: urlopen's later requests on it sent ``Host: 127.0.0.1:port``. The override is
    only where to connect (net/open_socket.py), on the direct path and under requests: the
    name asked for on every request, one kept-alive connection, either way."""
    monkeypatch.setenv("PREFETCH_RESOLVE", "example.test=127.0.0.1")
    server = KeepAliveServer([OK])
    port = server.base.rsplit(":", 1)[1]
    url = f"http://example.test:{port}/a.bin"
    try:
        with Client(timeouts=QUICK) as client:
            for _ in range(3):
                assert _get(client, url if route == "direct" else _through_requests(url))[0] == b"hello"
            assert (client._session is None) == (route == "direct")
    finally:
        server.close()
    assert [head.split(b"\r\n")[1] for _, head in server.seen] == [f"Host: example.test:{port}".encode()] * 3
    assert len({conn for conn, _ in server.seen}) == 1, "one kept-alive connection"


def test_a_warm_answer_whose_body_stalls_times_out_after_the_read_timeout():
    """The read timeout bounds every receive of a kept-alive connection's answer, its body too
    (the socket's timeout is switched only when it differs: here from the connect timeout)."""
    server = KeepAliveServer([OK, b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"])  # 5 bytes, then silence
    try:
        with Client(timeouts=Timeouts(connect=600, read=600)) as client:
            _get(client, f"{server.base}/a.bin")
            resp, _ = open_url(client, f"{server.base}/a.bin", timeouts=Timeouts(connect=600, read=0.3))
            started = time.monotonic()
            with pytest.raises(Exception) as info:  # noqa: PT011 - http.client's or the socket's timeout
                resp.read()
            assert "timed out" in str(info.value).lower() or isinstance(info.value, TimeoutError), info.value
            assert time.monotonic() - started < 120, "the read timeout (0.3 s), not the connect one (600 s)"
            resp.close()
    finally:
        server.close()
