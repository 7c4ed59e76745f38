"""``prefetch doctor`` on an https:// proxy that takes the connection but answers neither the
TLS handshake nor a plain HTTP request (hung, or no proxy at all): a failed check with get's
own fix hint, as ``get`` fails on it at once (net/proxies.handshake_timed_out); before, doctor
said it "accepts connections". A real listening socket on 127.0.0.1 that never answers."""

from __future__ import annotations

from tests.conftest import run_cli
from tests.proxies import SilentListener


def test_doctor_fails_a_proxy_silent_to_tls_and_to_http(home, tmp_path, monkeypatch):
    from tests.test_doctor import isolate_tool_env

    with SilentListener() as silent:
        port = silent.port
        env = isolate_tool_env(monkeypatch, home)
        env.update(https_proxy=f"https://127.0.0.1:{port}", PIP_INDEX_URL="http://127.0.0.1:9/simple",
                   UV_DEFAULT_INDEX="http://127.0.0.1:9/simple", no_proxy="127.0.0.1")
        proc = run_cli("doctor", "--deadline", "1", env=env, timeout=120)
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "accepts connections" not in out, out
    assert (f"[fail] proxy    the proxy 127.0.0.1:{port} (https_proxy) took the connection but did not answer "
            "the TLS handshake, nor a plain HTTP request: it is hung or not a proxy") in out, out
    assert "-> check it, or unset the proxy variable" in out, out
    assert "Traceback" not in proc.stderr
