"""``prefetch doctor`` on an https:// proxy that takes the connection but answers neither the
TLS handshake nor a plain HTTP request (hung, or no proxy at all): a failed check with get's
own fix hint, as ``get`` fails on it at once (net/proxies.handshake_timed_out); before, doctor
said it "accepts connections". A real listening socket on 127.0.0.1 that never answers."""

from __future__ import annotations

import socket
import threading

from tests.conftest import run_cli


def test_doctor_fails_a_proxy_silent_to_tls_and_to_http(home, tmp_path, monkeypatch):
    from tests.test_doctor import isolate_tool_env

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    port = server.getsockname()[1]
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not done.is_set():
            try:
                accepted.append(server.accept()[0])  # held open, never answered
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    env = isolate_tool_env(monkeypatch, home)
    env.update(https_proxy=f"https://127.0.0.1:{port}", PIP_INDEX_URL="http://127.0.0.1:9/simple",
               UV_DEFAULT_INDEX="http://127.0.0.1:9/simple", no_proxy="127.0.0.1")
    try:
        proc = run_cli("doctor", "--deadline", "1", env=env, timeout=120)
    finally:
        done.set()
        thread.join()
        for conn in accepted:
            conn.close()
        server.close()
    out = proc.stdout
    assert proc.returncode == 1, out
    assert "accepts connections" not in out, out
    assert (f"[fail] proxy    the proxy 127.0.0.1:{port} (https_proxy) took the connection but did not answer "
            "the TLS handshake, nor a plain HTTP request: it is hung or not a proxy") in out, out
    assert "-> check it, or unset the proxy variable" in out, out
    assert "Traceback" not in proc.stderr
