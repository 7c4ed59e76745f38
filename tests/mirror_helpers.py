"""Helpers for the mirror tests: a tiny wheel, a PEP 503 index, loopback servers, isolated tool env."""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import socket
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PKG = "prefetch-probe-pkg"
PKG_VERSION = "1.0"
# The tests' own bench file: their loopback mirrors serve made-up bytes, which the catalog's
# default file (pip 24.0's wheel) may never be: its bytes are held to the sha256 PyPI publishes.
BENCH_FILE = "probe_wheel-1.0-py3-none-any.whl"
BENCH_TOML = f'[bench]\nfile = "{BENCH_FILE}"\n'  # (a user's mirrors.toml naming it: no pinned hash)


def build_wheel(dest: Path, *, name: str = PKG, version: str = PKG_VERSION) -> Path:
    """Write a minimal, valid pure-Python wheel and return its path."""
    dist = name.replace("-", "_")
    wheel = Path(dest) / f"{dist}-{version}-py3-none-any.whl"
    files = {
        f"{dist}/__init__.py": b"VALUE = 42\n",
        f"{dist}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: probe\n"
        ).encode(),
        f"{dist}-{version}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record_lines = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record_lines.append(f"{path},sha256={digest},{len(data)}")
    record_path = f"{dist}-{version}.dist-info/RECORD"
    record_lines.append(f"{record_path},,")
    files[record_path] = ("\n".join(record_lines) + "\n").encode()
    Path(dest).mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


def build_simple_index(root: Path, files: dict[str, Path | bytes]) -> None:
    """A static PEP 503 tree: ``root/simple/<project>/index.html`` -> ``root/packages/<file>``.

    ``files`` maps a project name to a file path (copied) or ``{filename: bytes}`` dicts.
    """
    (root / "simple").mkdir(parents=True, exist_ok=True)
    (root / "packages").mkdir(parents=True, exist_ok=True)
    projects = []
    for project, item in files.items():
        entries = item if isinstance(item, dict) else {Path(item).name: Path(item).read_bytes()}
        links = []
        for filename, data in entries.items():
            (root / "packages" / filename).write_bytes(data)
            sha = hashlib.sha256(data).hexdigest()
            links.append(f'<a href="../../packages/{filename}#sha256={sha}">{filename}</a><br/>')
        normal = project.lower().replace("_", "-")
        (root / "simple" / normal).mkdir(exist_ok=True)
        (root / "simple" / normal / "index.html").write_text(
            f"<!DOCTYPE html><html><body>{''.join(links)}</body></html>\n"
        )
        projects.append(normal)
    (root / "simple" / "index.html").write_text(
        "<!DOCTYPE html><html><body>"
        + "".join(f'<a href="{p}/">{p}</a><br/>' for p in projects)
        + "</body></html>\n"
    )


@dataclass
class Server:
    """A loopback HTTP server over a directory; records every request path."""

    root: Path
    rate: float | None = None  # bytes per second for file bodies (None: as fast as possible)
    paths: list[str] = field(default_factory=list)
    httpd: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.httpd is not None
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> "Server":
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(server.root), **kwargs)

            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_GET(self):
                server.paths.append(self.path)
                if server.rate is None:
                    return super().do_GET()
                path = Path(self.translate_path(self.path))
                if path.is_dir():
                    path = path / "index.html"
                if not path.is_file():
                    return self.send_error(404)
                data = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                chunk = 4096
                try:
                    for start in range(0, len(data), chunk):
                        self.wfile.write(data[start : start + chunk])
                        self.wfile.flush()
                        time.sleep(chunk / server.rate)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()


class SilentServer:
    """Listens on loopback and never accepts: connections open, no byte ever comes back."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def stop(self) -> None:
        self.sock.close()


def closed_port_url() -> str:
    """A loopback URL on a port nothing listens on (connection refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def isolate_tool_env(monkeypatch, home: Path) -> dict[str, str]:
    """Scrub pip/uv/conda/HF settings so only this test's files count; return the env."""
    for name in list(os.environ):
        if name.startswith(("PIP_", "UV_")) or name in ("CONDARC", "CONDA_PREFIX", "HF_ENDPOINT", "IPYTHONDIR"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    # /etc/xdg/pip/pip.conf on CI machines may carry constraints; point the XDG global dir at tmp
    xdg_dirs = home / "xdg-global"
    xdg_dirs.mkdir(exist_ok=True)
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(xdg_dirs))
    return dict(os.environ)


def write_user_mirrors(home: Path, text: str) -> Path:
    """Write ``$PREFETCH_HOME/config/mirrors.toml`` (PREFETCH_HOME set by the ``home`` fixture)."""
    path = Path(os.environ["PREFETCH_HOME"]) / "config" / "mirrors.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def pip_user_conf(home: Path) -> Path:
    return home / ".config" / "pip" / "pip.conf"


@pytest.fixture
def index(tmp_path):
    """A simple index on 127.0.0.1 serving one real wheel of ``PKG`` (pip installs from it)."""
    root = tmp_path / "index"
    build_simple_index(root, {PKG: build_wheel(tmp_path / "wheels")})
    server = Server(root).start()
    yield server
    server.stop()
