"""A proxy (or server) that sends a 200 head and closes, with no length and no body.

A proxy that answers every request with ``HTTP/1.1 200 Connection established`` and hangs
up (a broken CONNECT-only proxy asked for a plain http URL, a captive box), or a server that
dies after the head: the body is "until the connection closes", i.e. empty, and prefetch
placed a 0-byte file and exited 0. Such an answer is now trouble worth asking again, then one
line, exit 3, nothing placed. An honest empty file (``Content-Length: 0``) still works.
Real CLI; a raw socket server on 127.0.0.1 as the proxy.
"""

from __future__ import annotations


import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_http import _RawServer
from tests.test_proxies import env_with


class HeadThenClose(_RawServer):
    """Answers every request with ``head`` and closes the connection (test_http's raw server);
    ``url`` is its root, a proxy's address."""

    def __init__(self, head: bytes) -> None:
        super().__init__(head)
        self.url = self.url.removesuffix("/f.bin")


@pytest.fixture
def origin():
    with OriginServer() as server:
        server.put("a.bin", b"a" * 30_000)
        yield server


@pytest.mark.parametrize("head", [b"HTTP/1.1 200 Connection established\r\n\r\n", b"HTTP/1.0 200 OK\r\n\r\n"])
def test_a_proxy_that_closes_after_a_200_head_places_nothing(home, tmp_path, origin, head):
    proxy = HeadThenClose(head)
    try:
        env = env_with(http_proxy=proxy.url, no_proxy="example.invalid", PREFETCH_RETRIES="2")
        out = tmp_path / "a.bin"
        proc = run_cli("get", origin.url_for("a.bin"), "-o", str(out), env=env)
        assert proc.returncode == 3, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "no body" in errors[0] and proxy.url in errors[0], errors[0]
        assert not out.exists()
        assert proxy.requests >= 2  # asked again: it may be a moment's trouble
    finally:
        proxy.close()


def test_an_empty_file_with_a_length_is_still_placed(home, tmp_path):
    server = HeadThenClose(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    try:
        out = tmp_path / "empty.bin"
        proc = run_cli("get", server.url + "/empty.bin", "-o", str(out), "-q", env=env_with())
        assert proc.returncode == 0, proc.stderr
        assert out.exists() and out.stat().st_size == 0
    finally:
        server.close()


def _page(status: str, page: bytes) -> bytes:
    """An HTML answer with ``status`` (the proxy's own page to a CONNECT)."""
    return b"HTTP/1.1 %s\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (
        status.encode(), len(page), page)


def _get_https_through(proxy: HeadThenClose, tmp_path, **env):
    """``prefetch get`` of an https origin's file through ``proxy``: (the process, the output path)."""
    with OriginServer(tls=True) as origin:
        origin.put("a.bin", b"a" * 30_000)
        out = tmp_path / "a.bin"
        proc = run_cli("get", origin.url_for("a.bin"), "-o", str(out),
                       env=env_with(https_proxy=proxy.url, no_proxy="example.invalid",
                                    REQUESTS_CA_BUNDLE=str(origin.ca_path), **env))
    return proc, out


def test_a_tunnel_that_is_a_portal_page_names_the_proxy(home, tmp_path):
    """CONNECT answered with 200 and an HTML page (a captive portal): the TLS handshake then
    fails on the page's bytes; the error names the proxy, not only the host, and places nothing."""
    proxy = HeadThenClose(_page("200 OK", b"<html><title>Login</title>log in first</html>"))
    try:
        proc, out = _get_https_through(proxy, tmp_path)
        assert proc.returncode == 3, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert f"through the proxy {proxy.url}" in errors[0], errors[0]
        assert not out.exists()
    finally:
        proxy.close()


def test_a_proxy_that_refuses_the_tunnel_with_403_is_final(home, tmp_path):
    """CONNECT answered 403 (the proxy's policy blocks the host): one line naming the proxy, not retried."""
    proxy = HeadThenClose(_page("403 Forbidden", b"<html><title>Forbidden</title></html>"))
    try:
        proc, out = _get_https_through(proxy, tmp_path, PREFETCH_RETRIES="3")
        assert proc.returncode == 3, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
        assert len(errors) == 1 and "403" in errors[0] and proxy.url in errors[0], proc.stderr
        assert "retry" not in proc.stderr and proxy.requests == 1, proc.stderr
        assert not out.exists()
    finally:
        proxy.close()


def test_a_tunnel_closed_as_soon_as_it_opened_says_the_proxy_may_block_the_host(home, tmp_path):
    """CONNECT answered 200, then the tunnel closed with nothing in it (Clash's REJECT rule, a
    proxy whose own connect failed after its 200): the error says so, naming proxy and host,
    rather than OpenSSL's "EOF occurred in violation of protocol" alone."""
    proxy = HeadThenClose(b"HTTP/1.1 200 Connection established\r\n\r\n")
    try:
        proc, out = _get_https_through(proxy, tmp_path)
        assert proc.returncode == 3, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
        assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert f" through the proxy {proxy.url} closed before the TLS handshake: the proxy may block 127.0.0.1:" \
            in errors[0], errors[0]
        assert not out.exists()
    finally:
        proxy.close()
