"""prefetch/net/http.py: keep-alive reuse, stale connections, partial reads, proxies.

Real sockets on 127.0.0.1 throughout: the local origin, a one-shot server that
closes idle connections, and a small forward proxy (plain GET and CONNECT).
"""

from __future__ import annotations

import base64
import hashlib
import os
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from prefetch.errors import ExitCode, NetworkError
from prefetch.net.http import Client, Timeouts, open_url
from prefetch.net.failures import TransientHTTPError
from tests.conftest import run_cli
from tests.test_bad_input import one_error_line
from tests.origin import Delay, OriginServer

DATA = os.urandom(300_000)
SHA = hashlib.sha256(DATA).hexdigest()
QUICK = Timeouts(connect=3, read=3)


@pytest.fixture
def origin():
    with OriginServer() as server:
        server.put("d.bin", DATA)
        yield server


def read_all(resp) -> bytes:
    buffer = memoryview(bytearray(64 << 10))
    out = bytearray()
    while n := resp.readinto(buffer):
        out += buffer[:n]
    return bytes(out)


# --------------------------------------------------------------------------- connections


def test_a_fully_read_response_leaves_its_connection_for_the_next_request(origin):
    with Client(timeouts=QUICK) as client:
        for _ in range(3):
            resp, _ = open_url(client, origin.url_for("d.bin"), headers={"Range": "bytes=0-99"})
            assert read_all(resp) == DATA[:100]
            resp.close()
    assert len(origin.data_requests("d.bin")) == 3
    assert len({r.client for r in origin.data_requests("d.bin")}) == 1  # one TCP connection


def test_an_unread_body_is_never_reused_and_the_next_request_is_clean(origin):
    with Client(timeouts=QUICK) as client:
        first, _ = open_url(client, origin.url_for("d.bin"), headers={})
        assert first.readinto(memoryview(bytearray(1000))) > 0
        first.close()  # most of the body still unread: the connection must go
        second, _ = open_url(client, origin.url_for("d.bin"), headers={"Range": "bytes=1000-"})
        assert read_all(second) == DATA[1000:]
        second.close()
    clients = [r.client for r in origin.data_requests("d.bin")]
    assert len(clients) == 2 and clients[0] != clients[1]


def test_a_reused_connection_gets_the_read_timeout_of_each_request(origin):
    with Client(timeouts=QUICK) as client:
        resp, _ = open_url(client, origin.url_for("d.bin"), headers={"Range": "bytes=0-9"})
        assert read_all(resp) == DATA[:10]
        resp.close()
        origin.add_fault(Delay(seconds=1.0))
        with pytest.raises(TransientHTTPError) as info:
            client.request(origin.url_for("d.bin"), timeouts=Timeouts(connect=3, read=0.2))
    assert info.value.timed_out
    assert len({r.client for r in origin.requests}) == 1  # it was the same, reused connection


def test_readinto_returns_what_has_arrived_not_a_full_buffer(origin):
    origin.rate = 100_000  # bytes trickle in
    with Client(timeouts=QUICK) as client:
        resp, _ = open_url(client, origin.url_for("d.bin"), headers={"Range": "bytes=0-199999"})
        n = resp.readinto(memoryview(bytearray(len(DATA))))
        resp.close()
    # A loop until the buffer is full would wait ~2 s for 200000 bytes; one receive
    # returns after the first throttled write (a tenth of the rate).
    assert 0 < n < 200_000


class _RawServer:
    """Answers every request with the same raw bytes (status line, headers, body), in
    pieces as a network delivers them, then closes the connection whatever the headers
    said. With ``Connection: keep-alive`` in them, the client keeps the connection for
    its next request and finds it closed: a server's idle keep-alive timeout. ``whole_head``
    False: answers the first bytes a connection sends, whatever they are (a TLS ClientHello,
    as squid answers one with a 400)."""

    def __init__(self, response: bytes, *, whole_head: bool = True) -> None:
        self.response = response
        self.whole_head = whole_head
        self.connections = 0
        self.requests = 0  # (request heads read; a connection opened ahead may send none)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/f.bin"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = conn.recv(4096)
                    if not chunk or not self.whole_head:
                        break
                    request += chunk
                self.requests += 1
                try:
                    for i in range(0, len(self.response), 50_000):
                        conn.sendall(self.response[i:i + 50_000])
                except OSError:
                    pass  # (the client gave up first)

    def close(self) -> None:
        self.sock.close()


def test_a_keep_alive_connection_the_server_closed_is_retried_once_on_a_fresh_one():
    server = _RawServer(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello")
    try:
        with Client(timeouts=QUICK) as client:
            for _ in range(3):
                resp, _ = open_url(client, server.url, headers={})
                assert read_all(resp) == b"hello"
                resp.close()
        assert server.connections == 3
    finally:
        server.close()


def _chunked(body: bytes, size: int = 70_000) -> bytes:
    parts = [b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size]) for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\n\r\n"


@pytest.mark.parametrize("framing", ["until-close", "chunked"])
def test_bodies_without_a_length_download_whole(home, tmp_path, framing):
    """No Content-Length (the body ends when the server closes) or chunked encoding: no
    size is known up front, one connection reads to the end, and the file is complete."""
    if framing == "chunked":
        raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + _chunked(DATA)
    else:
        raw = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + DATA
    server = _RawServer(raw)
    try:
        out = tmp_path / "f.bin"
        proc = run_cli("get", server.url, "-o", str(out), "--sha256", SHA, "-q")
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == DATA


def test_connection_refused_is_transient_and_says_so():
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with Client(timeouts=QUICK) as client, pytest.raises(TransientHTTPError, match="Connection refused"):
        client.request(f"http://127.0.0.1:{port}/x")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "http://127.0.0.1:99999/x", "http:///nohost"])
def test_urls_the_client_cannot_use_are_final_errors(url):
    with Client(timeouts=QUICK) as client, pytest.raises(NetworkError, match="invalid URL"):
        client.request(url)


def test_paths_are_quoted_and_already_quoted_paths_kept(origin):
    origin.put("a b/ü.bin", b"x" * 10)
    with Client(timeouts=QUICK) as client:
        for url in (f"{origin.url}/a b/ü.bin", f"{origin.url}/a%20b/%C3%BC.bin"):
            resp, _ = open_url(client, url, headers={})
            assert read_all(resp) == b"x" * 10
            resp.close()


# --------------------------------------------------------------------------- proxies


class _Proxy(ThreadingHTTPServer):
    """A forward proxy: absolute-URI GET/HEAD relayed with http.client, CONNECT tunnelled."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.seen: list[tuple[str, str, str | None]] = []  # (method, target, Proxy-Authorization)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _record(self) -> None:
        self.server.seen.append((self.command, self.path, self.headers.get("Proxy-Authorization")))

    def do_GET(self) -> None:
        import http.client

        self._record()
        target = urlsplit(self.path)
        upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "connection")}
        upstream.request(self.command, target.path or "/", headers=headers)
        resp = upstream.getresponse()
        body = resp.read()
        self.send_response(resp.status)
        for key, value in resp.getheaders():
            if key.lower() not in ("connection", "transfer-encoding", "keep-alive"):
                self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)
        upstream.close()

    do_HEAD = do_GET

    def do_CONNECT(self) -> None:
        self._record()
        host, port = self.path.rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)), timeout=10)
        self.send_response(200, "Connection established")
        self.end_headers()
        self.close_connection = True
        sockets = [self.connection, upstream]
        try:
            while True:
                ready, _, _ = select.select(sockets, [], [], 10)
                if not ready:
                    return
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (upstream if sock is self.connection else self.connection).sendall(data)
        finally:
            upstream.close()


@pytest.fixture
def proxy():
    server = _Proxy()
    yield server
    server.shutdown()
    server.server_close()


def proxy_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(extra)
    return env


def test_http_proxy_from_the_environment_carries_the_download(home, origin, proxy, tmp_path):
    user_proxy = proxy.url.replace("http://", "http://alice:s%40cret@")
    out = tmp_path / "d.bin"
    proc = run_cli("get", origin.url_for("d.bin"), "-o", str(out), "--sha256", SHA, "-q",
                   env=proxy_env(http_proxy=user_proxy))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == DATA
    assert proxy.seen and all(target.startswith(origin.url) for _, target, _ in proxy.seen)
    expected = "Basic " + base64.b64encode(b"alice:s@cret").decode()
    assert all(auth == expected for _, _, auth in proxy.seen)


def test_no_proxy_bypasses_the_proxy(home, origin, proxy, tmp_path):
    out = tmp_path / "d.bin"
    proc = run_cli("get", origin.url_for("d.bin"), "-o", str(out), "-q",
                   env=proxy_env(http_proxy=proxy.url, no_proxy="127.0.0.1"))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == DATA
    assert proxy.seen == []


def test_https_goes_through_the_proxy_with_connect_and_stays_verified(home, tls_origin, proxy, tmp_path):
    tls_origin.put("d.bin", DATA)
    out = tmp_path / "d.bin"
    env = proxy_env(https_proxy=proxy.url, REQUESTS_CA_BUNDLE=str(tls_origin.ca_path))
    proc = run_cli("get", tls_origin.url_for("d.bin"), "-o", str(out), "--sha256", SHA, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == DATA
    port = urlsplit(tls_origin.url).port
    assert proxy.seen and all(m == "CONNECT" and t == f"127.0.0.1:{port}" for m, t, _ in proxy.seen)

    # Through the tunnel the certificate is still checked: without the CA it fails.
    env.pop("REQUESTS_CA_BUNDLE")
    line = one_error_line(run_cli("get", tls_origin.url_for("d.bin"), "-o", str(tmp_path / "e.bin"), "-q",
                                  env=env), ExitCode.NETWORK)
    assert "TLS verification failed" in line


def test_an_unsupported_proxy_is_one_clear_line(home, origin, tmp_path):
    proc = run_cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), "-q",
                   env=proxy_env(http_proxy="socks5://127.0.0.1:1080"))
    line = one_error_line(proc, ExitCode.NETWORK)
    assert "socks5://127.0.0.1:1080" in line and "not supported" in line
    assert origin.requests == []


def test_urls_in_messages_carry_no_credentials():
    """Presigned S3 URLs (the team store's sources) and user:password@ never reach a log line."""
    from prefetch.net.urls import host_of, redact_url

    signed = ("https://alice:s3cret@store.lab:9000/bucket/keras/mnist.npz?X-Amz-Algorithm=AWS4-HMAC-SHA256"
              "&X-Amz-Credential=AKIA%2F20261123&X-Amz-Signature=0badc0ffee")
    shown = redact_url(signed)
    assert shown == "https://store.lab:9000/bucket/keras/mnist.npz?(signed)"
    assert redact_url("http://h:81/a/b.bin?version=2") == "http://h:81/a/b.bin?version=2"  # plain queries stay
    assert host_of(signed) == "store.lab:9000"
