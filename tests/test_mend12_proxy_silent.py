"""An https:// proxy that takes the connection but answers neither the TLS handshake nor a plain
HTTP request (hung, or no proxy at all): one line naming it and exit 3 at once, after one try
and the one plain check, not ~32 s of "timed out" retries. A real listening socket on 127.0.0.1
that accepts and never answers."""

from __future__ import annotations

from tests.conftest import run_cli
from tests.proxies import SilentListener
from tests.test_proxies import env_with


def test_a_proxy_silent_to_tls_and_to_http_fails_at_once_with_one_line(home, tmp_path):
    with SilentListener() as silent:
        port = silent.port
        env = env_with(https_proxy=f"https://127.0.0.1:{port}", PREFETCH_CONNECT_TIMEOUT="1",
                       PREFETCH_READ_TIMEOUT="1", PREFETCH_TIMEOUT="30")
        env.pop("PREFETCH_RETRIES", None)  # the default retries: the first try must be the last
        proc = run_cli("get", "https://files.example.invalid/a.bin", "-o", str(tmp_path / "a.bin"), env=env)
        accepted = len(silent.accepted)
    assert proc.returncode == 3, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr  # no retry notes
    assert lines[0].startswith(f"prefetch: error: the proxy https://127.0.0.1:{port} took the connection but did "
                               "not answer the TLS handshake"), lines
    assert "nor a plain HTTP request: it is hung or not a proxy" in lines[0], lines
    assert accepted == 2, accepted  # the one handshake and the one plain request
    assert not (tmp_path / "a.bin").exists()
