"""A real forward proxy for tests: Debian's tinyproxy on 127.0.0.1 at a free port.

``TinyProxy(tmp, user="alice", password="s3cret")`` writes its own config (never the
system service's), runs ``tinyproxy -d`` in the foreground, and serves plain http and
CONNECT tunnels (https) with optional Basic proxy authentication. ``url`` is the proxy
without credentials, ``url_with_credentials`` with them; ``log`` reads its log (the
requests it served); ``extra`` adds config lines (``Filter``, ``Upstream``). tests/run.sh installs tinyproxy.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests.helpers import stop_process


def tinyproxy_binary() -> str | None:
    return shutil.which("tinyproxy") or ("/usr/bin/tinyproxy" if Path("/usr/bin/tinyproxy").exists() else None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TinyProxy:
    """tinyproxy on loopback; a context manager."""

    def __init__(self, workdir: Path, *, user: str | None = None, password: str | None = None,
                 extra: str = "") -> None:
        binary = tinyproxy_binary()
        if binary is None:
            raise RuntimeError("tinyproxy is not installed: apt-get install tinyproxy (bash tests/run.sh does this)")
        self.binary = binary
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.user, self.password = user, password
        self.extra = extra  # more config lines: Filter, Upstream, ConnectPort ...
        self.port = 0
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url_with_credentials(self) -> str:
        return f"http://{self.user}:{self.password}@127.0.0.1:{self.port}" if self.user else self.url

    def log(self) -> str:
        try:
            return (self.dir / "tinyproxy.log").read_text(errors="replace")
        except OSError:
            return ""

    def start(self) -> "TinyProxy":
        for _ in range(5):
            self.port = _free_port()
            auth = f"BasicAuth {self.user} {self.password}\n" if self.user else ""
            (self.dir / "tinyproxy.conf").write_text(
                f"Port {self.port}\nListen 127.0.0.1\nTimeout 30\nMaxClients 64\nAllow 127.0.0.1\n{auth}"
                f'LogFile "{self.dir / "tinyproxy.log"}"\nLogLevel Info\nDisableViaHeader Yes\n{self.extra}'
            )
            self.proc = subprocess.Popen([self.binary, "-d", "-c", str(self.dir / "tinyproxy.conf")],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return self
                except OSError:
                    time.sleep(0.05)
            stop_process(self.proc)
        raise RuntimeError(f"tinyproxy did not start; its log:\n{self.log()}")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None

    def __enter__(self) -> "TinyProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class SilentListener:
    """A socket on 127.0.0.1 that accepts every connection and never answers (a hung proxy, or
    no proxy at all): ``with SilentListener() as silent: silent.port, len(silent.accepted)``."""

    def __enter__(self) -> "SilentListener":
        import threading

        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.server.settimeout(0.1)
        self.port = self.server.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()
        return self

    def _accept(self) -> None:
        while not self.done.is_set():
            try:
                self.accepted.append(self.server.accept()[0])  # held open, never answered
            except OSError:
                continue

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()
        for conn in self.accepted:
            conn.close()
        self.server.close()
