"""``https_proxy=https://...`` for a plain-HTTP proxy that does not answer a ClientHello at all.

squid answers a TLS ClientHello with a plain 400 at once (test_proxy_tls_plain.py). tinyproxy
reads it as the start of a request line and waits for its end, so the handshake timed out on
every try: ~32 s of "timed out" retries and a last error that did not say why. Now a handshake
timeout with an https:// proxy is followed by one plain request to the proxy itself (``GET /``,
nothing fetched through it): answered in HTTP, the variable's scheme is the slip, said in one
line at once, exit 3, as for squid; ``doctor`` says it too. The real tinyproxy on 127.0.0.1.
"""

from __future__ import annotations

from tests.conftest import run_cli
from tests.proxies import TinyProxy
from tests.test_proxies import env_with


def test_a_silent_plain_proxy_written_as_https_is_one_line_not_retries(home, tmp_path):
    with TinyProxy(tmp_path / "proxy") as proxy:
        env = env_with(https_proxy=f"https://127.0.0.1:{proxy.port}", PREFETCH_CONNECT_TIMEOUT="2")
        env.pop("PREFETCH_RETRIES", None)  # the default retries: one try must be enough
        proc = run_cli("get", "https://files.example.invalid/a.bin", "-o", str(tmp_path / "a.bin"), env=env)
        log = proxy.log()
    assert proc.returncode == 3, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [f"prefetch: error: the proxy https://127.0.0.1:{proxy.port} answered in plain HTTP, not TLS: "
                     f"write it as http://127.0.0.1:{proxy.port} in the proxy variable; fetching "
                     "files.example.invalid"], proc.stderr
    assert "files.example.invalid" not in log  # the check asked the proxy about itself only
    assert not (tmp_path / "a.bin").exists()


def test_a_silent_proxy_that_is_not_http_either_is_named(home, tmp_path):
    """A proxy that answers neither TLS nor HTTP (hung): not taken for the slip; the line says
    the handshake went unanswered, not just "timed out" (final at once since the twelfth
    sitting: tests/test_mend12_proxy_silent.py)."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)  # accepted by the kernel, never answered
    port = server.getsockname()[1]
    try:
        env = env_with(https_proxy=f"https://127.0.0.1:{port}", PREFETCH_CONNECT_TIMEOUT="1",
                       PREFETCH_READ_TIMEOUT="1", PREFETCH_TIMEOUT="3")
        proc = run_cli("get", "https://files.example.invalid/a.bin", "-o", str(tmp_path / "a.bin"), env=env)
    finally:
        server.close()
    assert proc.returncode == 3, proc.stderr
    assert "answered in plain HTTP" not in proc.stderr
    assert f"the proxy https://127.0.0.1:{port} took the connection but did not answer the TLS handshake" \
        in proc.stderr, proc.stderr
    assert not (tmp_path / "a.bin").exists()


def test_doctor_finds_the_silent_plain_proxy(home, tmp_path, monkeypatch):
    from tests.test_doctor import isolate_tool_env

    env = isolate_tool_env(monkeypatch, home)
    with TinyProxy(tmp_path / "proxy") as proxy:
        env.update(https_proxy=f"https://127.0.0.1:{proxy.port}", PIP_INDEX_URL="http://127.0.0.1:9/simple",
                   UV_DEFAULT_INDEX="http://127.0.0.1:9/simple", no_proxy="127.0.0.1")
        done = run_cli("doctor", "--deadline", "1", env=env)
    out = done.stdout
    assert done.returncode == 1, out
    assert (f"[fail] proxy    the proxy 127.0.0.1:{proxy.port} (https_proxy) answers in plain HTTP, where the "
            "variable's https:// asks for TLS") in out, out
    assert f"-> write it as http://127.0.0.1:{proxy.port} in https_proxy" in out
