"""``https_proxy=https://proxy:3128`` for a proxy that speaks plain HTTP (the usual mistake: the
scheme names how to talk to the proxy, not what it carries), and ``https://`` for a plain-http
server. The TLS handshake gets a plain-HTTP answer (squid answers a ClientHello with a 400 at
once): OpenSSL's "wrong version number". That was retried as connection trouble for ~16 s and
said in OpenSSL's words; it is final now, one line saying what to write instead, exit 3.
Real CLI; a raw socket server on 127.0.0.1 answering as squid does; the suite's origin.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.test_http import _RawServer
from tests.test_proxies import env_with
from tests.test_proxy_hostile_scheme import origin  # noqa: F401 - the fixture: a.bin of 20,000 bytes


class PlainProxy(_RawServer):
    """Answers the first bytes of every connection (a TLS ClientHello here) with an HTTP 400, as
    squid does for a request it cannot parse, and closes it (test_http's raw server)."""

    def __init__(self) -> None:
        super().__init__(b"HTTP/1.1 400 Bad Request\r\nServer: squid\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n", whole_head=False)
        self.port = self.sock.getsockname()[1]


@pytest.mark.parametrize("variable", ["http_proxy", "HTTPS_PROXY"])
def test_an_https_proxy_url_for_a_plain_proxy_is_one_line_at_once(home, tmp_path, origin, variable):
    proxy = PlainProxy()
    try:
        url = origin.url_for("a.bin") if variable == "http_proxy" else "https://example.invalid/a.bin"
        env = env_with(**{variable: f"https://127.0.0.1:{proxy.port}"})
        env.pop("PREFETCH_RETRIES", None)  # the default retries: this must not be retried at all
        proc = run_cli("get", url, "-o", str(tmp_path / "a.bin"), env=env)
    finally:
        proxy.close()
    assert proc.returncode == 3, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [f"prefetch: error: the proxy https://127.0.0.1:{proxy.port} answered in plain HTTP, not TLS: "
                     f"write it as http://127.0.0.1:{proxy.port} in the proxy variable; fetching "
                     f"{url.split('/')[2]}"], proc.stderr
    assert proxy.connections == 1
    assert not (tmp_path / "a.bin").exists()


def test_an_https_url_of_a_plain_http_server_says_to_try_http(home, tmp_path, origin):
    url = origin.url_for("a.bin").replace("http://", "https://")
    env = env_with()
    env.pop("PREFETCH_RETRIES", None)
    proc = run_cli("get", url, "-o", str(tmp_path / "a.bin"), env=env)
    assert proc.returncode == 3, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("prefetch: error: TLS error with 127.0.0.1:"), proc.stderr
    assert lines[0].endswith(f"the server answered in plain HTTP, not TLS: try {origin.url_for('a.bin')}"), lines
    assert not (tmp_path / "a.bin").exists()


def test_doctor_says_which_variable_to_write_as_http(home, monkeypatch):
    """`prefetch doctor` finds the slip before any download: a TLS handshake with each https://
    proxy; and a source checked through it says the proxy answered in plain HTTP."""
    from tests.test_doctor import isolate_tool_env  # (the doctor tests' environment without real tools)

    env = isolate_tool_env(monkeypatch, home)
    proxy = PlainProxy()
    try:
        env.update(https_proxy=f"https://127.0.0.1:{proxy.port}", PIP_INDEX_URL="http://127.0.0.1:9/simple",
                   UV_DEFAULT_INDEX="http://127.0.0.1:9/simple", no_proxy="127.0.0.1")
        done = run_cli("doctor", "--deadline", "1", env=env)
    finally:
        proxy.close()
    assert done.returncode == 1, done.stdout
    out = done.stdout
    assert (f"[fail] proxy    the proxy 127.0.0.1:{proxy.port} (https_proxy) answers in plain HTTP, where the "
            "variable's https:// asks for TLS") in out, out
    assert f"-> write it as http://127.0.0.1:{proxy.port} in https_proxy" in out
    assert "blocked at proxy" not in out or "the proxy answered in plain HTTP, not TLS" in out
