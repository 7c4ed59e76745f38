"""Requests that need nothing of requests go out on connections of our own (net/direct.py), and
look exactly like requests' own to the server: same head, cookies kept, TLS still verified."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading

import pytest

from prefetch.errors import NetworkError
from prefetch.net.http import Client, open_url


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every GET with 4 bytes; remembers each request's head; /cookie sets a cookie."""

    protocol_version = "HTTP/1.1"
    seen: list = []

    def do_GET(self):  # noqa: N802 - http.server's name
        type(self).seen.append((self.path, [(k.lower(), v) for k, v in self.headers.items()]))
        self.send_response(200)
        if self.path.startswith("/cookie"):
            self.send_header("Set-Cookie", "session=abc123; Path=/")
        self.send_header("Content-Length", "4")
        self.end_headers()
        self.wfile.write(b"data")

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Recorder.seen
    server.shutdown()
    server.server_close()


def _get(client, url, headers=None):
    resp, _ = open_url(client, url, headers=headers)
    body = resp.read()
    resp.close()
    return body


def test_a_plain_request_goes_out_without_importing_requests(recorder, monkeypatch):
    """No proxy, no netrc, a plain URL: neither requests (0.1-0.2 s to import) nor urllib3."""
    base, _ = recorder
    code = ("import sys\nfrom prefetch.net.http import Client, open_url\n"
            "c = Client()\nr, _ = open_url(c, sys.argv[1])\nassert r.read() == b'data'\nr.close()\n"
            "print('requests' in sys.modules, 'urllib3' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["HOME"] = str(os.environ.get("HOME", "/root"))
    env.pop("NETRC", None)
    run = subprocess.run([sys.executable, "-c", code, base + "/plain"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    netrc = any(os.path.exists(os.path.expanduser(n)) for n in ("~/.netrc", "~/_netrc"))
    assert run.stdout.strip() == ("True True" if netrc else "False False")
    # With a proxy variable (the host excluded by no_proxy, so the request still arrives), requests
    # decides whether the proxy applies: imported ...
    env.update(http_proxy="http://127.0.0.1:9", no_proxy="127.0.0.0/8")
    run = subprocess.run([sys.executable, "-c", code, base + "/proxied"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "True True"
    # ... unless no_proxy names the host itself: requests' answer is known then (no proxy), and
    # it is not imported to give it (net/proxies.py's no_proxy_names).
    env.update(no_proxy="localhost, 127.0.0.1")
    run = subprocess.run([sys.executable, "-c", code, base + "/named"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == ("True True" if netrc else "False False")


def test_the_direct_head_is_the_head_requests_sends(recorder, monkeypatch):
    """The same URL once directly, once through requests (a cookie moves the client there):
    the server sees the same request line and headers, the cookie aside."""
    monkeypatch.delenv("NETRC", raising=False)
    for name in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    base, seen = recorder
    with Client() as client:
        assert _get(client, base + "/cookie", headers={"Range": "bytes=0-3", "user-agent": "mine/1"}) == b"data"
        assert client._session is not None and client._session.cookies  # the cookie was kept ...
        assert _get(client, base + "/cookie", headers={"Range": "bytes=0-3", "user-agent": "mine/1"}) == b"data"
    (path1, head1), (path2, head2) = seen
    assert path1 == path2 == "/cookie"
    assert ("cookie", "session=abc123") in head2  # ... and sent back, as requests does
    assert sorted(head1) == sorted(h for h in head2 if h[0] != "cookie")
    names = [k for k, _ in head1]
    assert names.count("user-agent") == 1 and ("user-agent", "mine/1") in head1  # a caller's header replaces
    assert ("accept-encoding", "identity") in head1 and ("connection", "keep-alive") in head1


def test_a_url_requests_would_requote_goes_through_requests(recorder):
    """``%`` escapes are requests' to normalise (a signed URL must go out as requests sends it)."""
    base, seen = recorder
    with Client() as client:
        assert _get(client, base + "/a%7Eb") == b"data"
        assert client._direct is None and client._session is not None
        assert _get(client, base + "/plain") == b"data"
        assert client._direct is not None
    assert [p for p, _ in seen] == ["/a~b", "/plain"]


def test_https_direct_is_verified(tls_origin, monkeypatch):
    """A direct https request trusts the bundle the environment names, and nothing else."""
    tls_origin.put("f.bin", b"x" * 1000)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tls_origin.ca_path))
    with Client() as client:
        assert _get(client, tls_origin.url_for("f.bin")) == b"x" * 1000
        assert client._direct is not None and client._session is None
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    for name in ("CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    with Client() as client, pytest.raises(NetworkError, match="TLS verification failed"):
        _get(client, tls_origin.url_for("f.bin"))



def test_a_resolve_override_connects_there_but_verifies_the_name_asked_for(tls_origin, monkeypatch):
    """PREFETCH_RESOLVE, like curl's --resolve, only says where to connect: TLS still checks the
    certificate against the name in the URL. The test certificate is for 127.0.0.1 and
    localhost, so a name it does not cover is refused even though the override points at
    127.0.0.1 (checking the address instead would take any certificate the address has)."""
    tls_origin.put("f.bin", b"x" * 1000)
    port = tls_origin.url_for("f.bin").split(":")[2].split("/")[0]
    monkeypatch.setenv("PREFETCH_RESOLVE", "localhost=127.0.0.1,example.test=127.0.0.1")
    with Client() as client:
        for _ in range(2):  # (the second request on the kept connection, then a fresh one)
            assert _get(client, f"https://localhost:{port}/f.bin") == b"x" * 1000
    with Client() as client, pytest.raises(NetworkError, match="TLS verification failed"):
        _get(client, f"https://example.test:{port}/f.bin")


_HEADS = [
    b"Server: nginx/1.24.0\r\nContent-Type: application/octet-stream\r\nContent-Length: 4\r\n"
    b"ETag: \"6926a1ae-4\"\r\nAccept-Ranges: bytes\r\n\r\n",
    b"Content-Length: 4\r\nA:b\r\nC:   d  \r\nE: \t x\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nX:\r\n\r\n",
    b"Content-Length: 4\r\nX-Folded: a\r\n b\r\n\r\n",  # an obsolete folded line
    b"Content-Length: 4\r\nX-Cr: a\rb\r\n\r\n",  # a stray CR inside a value
    b"Content-Length: 4\r\nBad Header: x\r\nY: z\r\n\r\n",  # not a header line: the rest is "body"
    b"Content-Length: 4\r\nContent-Type: multipart/byteranges; boundary=x\r\n\r\n",
    b"Content-Length: 4\r\nX-Latin: \xe9t\xe9\r\n\r\n",
    b"Content-Length: 4\n\n",
]


@pytest.mark.parametrize("head", _HEADS)
def test_a_head_parsed_without_the_email_package_is_the_message_http_client_builds(head):
    """A plain head skips the email parser (net/connection.py); every head, plain or not,
    gives the HTTPMessage http.client's own parser gives, through a real connection too."""
    import http.client
    import io

    from prefetch.net.read_head import _quick_headers

    def same(a, b) -> bool:
        return (type(a) is type(b) and a.items() == b.items() and a.get_payload() == b.get_payload()
                and [type(d) for d in a.defects] == [type(d) for d in b.defects])

    assert same(_quick_headers(io.BytesIO(head)), http.client.parse_headers(io.BytesIO(head)))

    # Direct, then through requests (an escape in the URL): both parse with it.
    for client, resp in answers_on_both_paths(head):
        parsed = resp._raw  # (http.client's response)
        # (a direct answer's is its subclass whose reader may be kept: net/pipeline.py)
        assert "QuickHeadResponse" in [cls.__name__ for cls in type(parsed).__mro__[:2]]
        expected = http.client.parse_headers(io.BytesIO(head))
        if client._direct is None:  # (urllib3 2.8 puts a folded line on one line in the message it read)
            import urllib3.connection

            getattr(urllib3.connection, "_normalize_header_values", lambda message: None)(expected)
        assert same(parsed.msg, expected)


def answers_on_both_paths(head: bytes):
    """``HTTP/1.1 200 OK``, ``head`` and a 4-byte body from a raw server on 127.0.0.1, read by a
    ``Client`` on its direct path, then through requests (an escape in the URL): (client,
    response) for each, the response closed after."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        for _ in range(2):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\n" + head + b"data")

    threading.Thread(target=answer, daemon=True).start()
    try:
        for path in ("/x.bin", "/x%2Ebin"):
            with Client() as client:
                resp = client.request(f"http://127.0.0.1:{listener.getsockname()[1]}{path}")
                assert (client._direct is not None) == (path == "/x.bin")
                try:
                    yield client, resp
                finally:
                    resp.close()
    finally:
        listener.close()


def test_idle_connections_are_kept_for_the_last_ten_hosts_ten_each(monkeypatch):
    """Each host's connection waits for its next request there (net/direct.py); past 10 hosts
    the least recently used host's are closed, and a host keeps at most 10 idle (requests'
    adapter: 10 pools of 10)."""
    from tests.keepalive import KeepAliveServer

    names = [f"h{i}.test" for i in range(11)]
    monkeypatch.setenv("PREFETCH_RESOLVE", ",".join(f"{name}=127.0.0.1" for name in names))
    server = KeepAliveServer([b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ndata"])
    port = server.base.rsplit(":", 1)[1]
    try:
        with Client() as client:
            for name in names + [names[10], names[1], names[0]]:
                assert _get(client, f"http://{name}:{port}/f") == b"data"
            for _ in range(12):
                client.connect(f"http://{names[5]}:{port}/f")
            idle = client._direct._idle
            assert len(idle) == 10 and len(idle[("http", names[5], int(port))]) == 10
    finally:
        server.close()
    # h0..h10 each open one; h10 and h1 reuse theirs; h0's was closed with the 11th host: a new one.
    assert [number for number, _ in server.seen] == list(range(1, 12)) + [11, 2, 12]
    assert [head.split(b"\r\n")[1] for _, head in server.seen][-1] == f"Host: h0.test:{port}".encode()


def test_a_connection_out_when_its_client_closes_is_closed_when_it_comes_back(recorder):
    """As urllib3's closed pool: what a request still held at the client's close is not kept."""
    base, seen = recorder
    client = Client()
    resp, _ = open_url(client, base + "/a")
    client.close()
    assert resp.read() == b"data"
    resp.close()
    assert client._direct._idle == {}
    assert _get(client, base + "/b") == b"data"  # (a client closed can still be used: a fresh connection)
    assert client._direct._idle
    client.close()
    assert [path for path, _ in seen] == ["/a", "/b"]


def test_an_https_connection_opened_ahead_carries_the_next_request(tls_origin):
    """A TLS 1.3 server sends its session tickets after the handshake: on a connection opened
    ahead (Client.connect) and not used yet they wait unread, and an idle connection with
    something to read looks closed. Tickets are not an answer: the request goes out on it."""
    import time

    tls_origin.put("f.bin", b"x" * 1000)
    with Client() as client:
        assert client.connect(tls_origin.url_for("f.bin"))
        (opened,) = [conn for conns in client._direct._idle.values() for conn in conns]
        assert opened.sock.version() == "TLSv1.3"
        port = opened.sock.getsockname()[1]
        time.sleep(0.3)  # (the tickets are in)
        assert _get(client, tls_origin.url_for("f.bin")) == b"x" * 1000
    assert [r.client[1] for r in tls_origin.data_requests("f.bin")] == [port]
