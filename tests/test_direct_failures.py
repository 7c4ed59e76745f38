"""A direct request's failure (net/direct.py: the socket's, http.client's and ssl's own
exceptions) is the same prefetch error as the same failure under requests and urllib3: the
same class, words, kind and timed-out flag, so the same retries and exit codes.

Each case fails one request twice on the same servers: once direct (a plain URL) and once
through requests (the same URL with a ``%2E`` for a ".": requests re-quotes an escape, so it
takes that one, and sends it as "."). Real servers on 127.0.0.1 script each failure.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from prefetch.errors import NetworkError
from prefetch.net.failures import TransientHTTPError
from prefetch.net.http import Client, Timeouts

QUICK = Timeouts(connect=0.5, read=0.5)


class _Scripted:
    """Accepts connections on 127.0.0.1 and runs ``script(conn)`` on each, in its own thread."""

    def __init__(self, script) -> None:
        self.script = script
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        with conn:
            try:
                _read_request(conn)
                self.script(conn)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


def _read_request(conn: socket.socket) -> bytes:
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = conn.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def _failure(client: Client, url: str, headers=None) -> tuple:
    """(class, message with the URL replaced, kind, timed_out) of the request's failure."""
    with pytest.raises((TransientHTTPError, NetworkError)) as info:
        client.request(url, headers=headers)
    exc = info.value
    return (type(exc).__name__, str(exc).replace(url, "URL"), getattr(exc, "kind", None),
            getattr(exc, "timed_out", None))


def _both_scripted(script) -> tuple[tuple, tuple, int]:
    """:func:`_both` against a :class:`_Scripted` server running ``script``; its port too."""
    server = _Scripted(script)
    try:
        return (*_both(f"http://127.0.0.1:{server.port}/f.bin"), server.port)
    finally:
        server.close()


def _both(url: str, *, resolve=None, headers=None, timeouts=QUICK) -> tuple[tuple, tuple]:
    """The failure of ``url`` direct, then through requests (``url`` with its last "." escaped)."""
    stem, dot, ext = url.rpartition(".")
    escaped = f"{stem}%2E{ext}"
    with Client(timeouts=timeouts, resolve=resolve) as direct:
        first = _failure(direct, url, headers)
        assert direct._direct is not None and direct._session is None, "the plain URL went direct"
    with Client(timeouts=timeouts, resolve=resolve) as through:
        second = _failure(through, escaped, headers)
        assert through._direct is None and through._session is not None, "the escaped URL went through requests"
    return first, second[:1] + (second[1].replace(escaped, "URL"),) + second[2:]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    for name in [k for k in __import__("os").environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)


def test_a_refused_connection():
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    direct, through = _both(f"http://127.0.0.1:{port}/f.bin")
    assert direct == through
    assert direct[1] == f"127.0.0.1:{port}: Connection refused" and direct[2] == "unreachable"


def test_a_name_that_does_not_resolve():
    direct, through = _both("http://nowhere.test:8080/f.bin", resolve={"nowhere.test": None})
    assert direct == through
    assert direct[1] == "nowhere.test:8080: name lookup failed (Name or service not known)"
    assert direct[2] == "unreachable"


def test_a_connect_that_times_out():
    """A listener whose backlog is full: the kernel drops the next handshakes unanswered."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    held = []
    try:
        for _ in range(4):  # (fill the queue: the first one or two get in, the rest wait)
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            held.append(filler)
        time.sleep(0.2)
        direct, through = _both(f"http://127.0.0.1:{port}/f.bin")
    finally:
        for s in held:
            s.close()
        listener.close()
    assert direct == through
    assert direct == ("TransientHTTPError", f"127.0.0.1:{port}: timed out", "unreachable", True)


def test_no_answer_within_the_read_timeout():
    direct, through, port = _both_scripted(lambda conn: time.sleep(3))
    # (the receive timeout and the head deadline are both 0.5 s: either may end the wait first)
    assert direct[0] == through[0] == "TransientHTTPError" and direct[2] == through[2] == "timeout"
    assert direct[3] is through[3] is True
    assert direct[1].startswith(f"127.0.0.1:{port}: timed out")


def test_a_head_sent_a_byte_at_a_time_hits_the_head_deadline():
    def trickle(conn):
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Slow: " + b"x" * 100:
            conn.sendall(bytes([byte]))
            time.sleep(0.05)

    direct, through, port = _both_scripted(trickle)
    assert direct == through
    assert direct == ("TransientHTTPError", f"127.0.0.1:{port}: timed out: no complete response head "
                      "within 0.5s", "timeout", True)


def _reset(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Le")
    time.sleep(0.1)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # close = RST


@pytest.mark.parametrize("script", [_reset, lambda conn: conn.sendall(b"SPEAK FRIEND\r\n\r\n"),
                                    lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70_000)],
                         ids=["reset-mid-head", "not-http", "header-line-too-long"])
def test_an_answer_broken_off_or_not_http(script):
    direct, through, _ = _both_scripted(script)
    assert direct == through
    assert direct[0] == "TransientHTTPError" and direct[2] == "broken"


def test_a_header_http_client_refuses():
    """Refused before anything is sent, as urllib3's http.client refused it (requests refuses it
    earlier, in its own words: the direct words are urllib3's, as before there was a direct path)."""
    server = _Scripted(lambda conn: conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
    try:
        with Client(timeouts=QUICK) as client:
            url = f"http://127.0.0.1:{server.port}/f.bin"
            failed = _failure(client, url, {"X-Bad": "a\r\nInjected: 1"})
    finally:
        server.close()
    assert failed == ("NetworkError", "invalid URL URL: Invalid header value b'a\\r\\nInjected: 1'", None, None)


def test_a_certificate_not_trusted(tls_origin, monkeypatch):
    tls_origin.put("f.bin", b"x" * 100)
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    direct, through = _both(tls_origin.url_for("f.bin"))
    assert direct == through
    assert direct[0] == "NetworkError" and direct[1].startswith("TLS verification failed for URL: ")
    assert "certificate verify failed" in direct[1]


def test_a_certificate_for_another_name(tls_origin):
    """The override says where to connect; the certificate must still name the host asked for."""
    tls_origin.put("f.bin", b"x" * 100)
    port = tls_origin.url_for("f.bin").split(":")[2].split("/")[0]
    direct, through = _both(f"https://example.test:{port}/f.bin", resolve={"example.test": "127.0.0.1"})
    assert direct == through
    assert direct[0] == "NetworkError" and "Hostname mismatch" in direct[1]
