"""Small helpers shared by several test modules (a helper module, not tests; fixtures live in conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def write_registry(path: Path, dataset: str, url: str, *, sha256: str | None = None, target: str | None = None,
                   extract: list[str] | None = None) -> Path:
    """A user registry (``--registry PATH``) with one dataset of one file."""
    def toml(value) -> str:
        return json.dumps(value, ensure_ascii=False)  # a JSON string or list of strings is valid TOML

    lines = [f"[{dataset}]", f"[[{dataset}.files]]", f"url = {toml(url)}"]
    for key, value in (("sha256", sha256), ("target", target), ("extract", extract)):
        if value is not None:
            lines.append(f"{key} = {toml(value)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def stop_process(proc: subprocess.Popen, *, timeout: float = 5.0) -> None:
    """SIGTERM a server we started, then SIGKILL it if it has not gone within ``timeout`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def start_cli(*args: str, **popen) -> subprocess.Popen:
    """Start ``python -m prefetch ARGS`` without a TTY and without waiting (``run_cli`` waits)."""
    popen.setdefault("stdin", subprocess.DEVNULL)
    popen.setdefault("env", os.environ.copy())
    return subprocess.Popen([sys.executable, "-m", "prefetch", *args], **popen)


def sigkill_when(proc: subprocess.Popen, ready: Callable[[], bool], *, what: str, timeout: float = 60.0,
                 details: Callable[[], str] = lambda: "") -> None:
    """SIGKILL ``proc`` as soon as ``ready()`` holds; fail if it ends or ``timeout`` passes first."""
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None:
                raise AssertionError(f"prefetch ended (exit {proc.returncode}) before {what} {details()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what} {details()}")
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, f"prefetch ended (exit {proc.returncode}) before the kill {details()}"


def serve_in_thread(handler, **attributes):
    """A ``ThreadingHTTPServer`` on 127.0.0.1, port 0, serving ``handler`` in a daemon thread.

    ``attributes`` are set on the server (the handler reaches its owner through them).
    Returns (server, base URL); stop it with ``stop_server``.
    """
    import threading
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    for name, value in attributes.items():
        setattr(server, name, value)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def stop_server(server) -> None:
    """Stop a server started by ``serve_in_thread`` (None: nothing to do)."""
    if server is not None:
        server.shutdown()
        server.server_close()


class LocalHubApi:
    """What the local hub APIs (``tests/hub_origin.py``, ``tests/ms_origin.py``) share: file bytes come
    from their own CDN origin, the API runs in a thread, and the object is a context manager.

    A subclass calls ``_init_api()`` from ``__post_init__`` and sets two class attributes after its
    handler is defined: ``api_handler`` (the request handler class) and ``api_name`` (the server
    attribute through which the handler reaches the hub object).
    """

    api_handler = None
    api_name = "hub"

    def _init_api(self) -> None:
        import threading

        from tests.origin import OriginServer

        self.cdn = OriginServer()
        self.repos = {}
        self.lock = threading.Lock()
        self.url = ""
        self._server = None

    def __enter__(self):
        self.cdn.start()
        self._server, self.url = serve_in_thread(type(self).api_handler, **{self.api_name: self})
        return self

    def __exit__(self, *exc) -> None:
        stop_server(self._server)
        self.cdn.stop()
