"""A real nginx serving a directory, for tests that want a production web server.

``NginxServer(root, limit_rate="200k")`` writes a minimal nginx.conf into a temporary
prefix (pid, logs and temp paths all inside it), runs ``nginx -c CONF -p PREFIX -e LOG``
in the foreground (``daemon off; master_process off;``, so it never switches user and
can read root-only pytest tmp dirs) on 127.0.0.1 at a free port, waits until it accepts
connections and stops it on exit. ``tls=True`` serves https with a throwaway CA
(``ca_path``: give it as ``REQUESTS_CA_BUNDLE``). ``nginx_binary()`` finds the executable (``NGINX`` env
var, then PATH, then the usual sbin paths) or returns None.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from tests.helpers import stop_process

__all__ = ["NginxServer", "nginx_binary"]

_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx",
               "/opt/homebrew/bin/nginx", "/usr/local/bin/nginx")


def nginx_binary() -> str | None:
    """Path of the nginx executable, or None when it is not installed."""
    override = os.environ.get("NGINX")
    if override and os.access(override, os.X_OK):
        return override
    found = shutil.which("nginx")
    if found:
        return found
    for candidate in _CANDIDATES:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _nginx_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _render_conf(*, prefix: Path, root: Path, port: int, limit_rate: str | None,
                 limit_conn: int | None = None, tls: tuple[Path, Path] | None = None, location: str = "") -> str:
    rate = f"        limit_rate {limit_rate};\n" if limit_rate else ""
    rate += "".join(f"        {line.strip()}\n" for line in location.splitlines() if line.strip())
    zone = "    limit_conn_zone $binary_remote_addr zone=perclient:1m;\n" if limit_conn else ""
    if limit_conn:
        rate += f"        limit_conn perclient {limit_conn};\n        limit_conn_status 503;\n"
    p = prefix
    listen = f"127.0.0.1:{port}"
    if tls:
        listen += (f" ssl;\n        ssl_certificate {_nginx_string(str(tls[0]))};\n"
                   f"        ssl_certificate_key {_nginx_string(str(tls[1]))}")
    return f"""\
daemon off;
master_process off;
worker_processes 1;
pid {_nginx_string(str(p / 'nginx.pid'))};
error_log {_nginx_string(str(p / 'error.log'))} warn;

events {{
    worker_connections 256;
}}

http {{
    access_log {_nginx_string(str(p / 'access.log'))};
    # When each response ended ($msec, epoch seconds), how long it took and its size:
    # for tests that compute a transfer rate from the server's side.
    log_format timing '$msec $request_time $bytes_sent $body_bytes_sent $status "$request"';
    access_log {_nginx_string(str(p / 'timing.log'))} timing;
    # What each request asked for and how much of the body went out: wasted bytes show here.
    log_format ranges '$body_bytes_sent $status $connection "$http_range" "$request"';
    access_log {_nginx_string(str(p / 'ranges.log'))} ranges;
    # Which TCP connection served each request ($connection, a serial number), its request
    # count on it, and when the response began and ended: connections and concurrency, counted
    # on the server's side.
    log_format conns '$connection $connection_requests $msec $request_time $status $body_bytes_sent "$request"';
    access_log {_nginx_string(str(p / 'connections.log'))} conns;
    # Who asked ($http_x_client: a test's processes each send their own X-Client header), and
    # what went out: which process fetched which file.
    log_format clients '"$http_x_client" $status $body_bytes_sent "$request"';
    access_log {_nginx_string(str(p / 'clients.log'))} clients;
    client_body_temp_path {_nginx_string(str(p / 'tmp' / 'client_body'))};
    proxy_temp_path {_nginx_string(str(p / 'tmp' / 'proxy'))};
    fastcgi_temp_path {_nginx_string(str(p / 'tmp' / 'fastcgi'))};
    uwsgi_temp_path {_nginx_string(str(p / 'tmp' / 'uwsgi'))};
    scgi_temp_path {_nginx_string(str(p / 'tmp' / 'scgi'))};
    default_type application/octet-stream;
    # The types a stock nginx (mime.types) sends for the names tests use.
    types {{
        application/x-tar tar;
        application/gzip gz tgz;
        application/zip zip npz;
        text/html html htm;
        application/json json;
    }}
    sendfile on;
    keepalive_timeout 30s;
{zone}
    server {{
        listen {listen};
        server_name localhost;
        root {_nginx_string(str(root))};
        location / {{
{rate}        }}
    }}
}}
"""


class NginxServer:
    """nginx serving ``root`` on 127.0.0.1 (``url``, ``url_for(name)``), with an optional
    per-connection ``limit_rate`` (nginx syntax: "100k", "1m") and an optional cap of
    ``limit_conn`` connections per client address (more are answered 503)."""

    def __init__(self, root: Path, *, limit_rate: str | None = None, limit_conn: int | None = None,
                 binary: str | None = None, start_timeout: float = 10.0, tls: bool = False, location: str = ""):
        self.root = Path(root).resolve()
        self.location = location  # more directives for the one ``location /`` (e.g. an add_header)
        self.limit_rate = limit_rate
        self.limit_conn = limit_conn
        self.binary = binary or nginx_binary()
        self.start_timeout = start_timeout
        self.tls = tls
        self.ca_path: Path | None = None  # (tls) the CA that signed the server's certificate
        self.url = ""
        self.port = 0
        self.prefix: Path | None = None
        self._proc: subprocess.Popen | None = None

    @property
    def error_log(self) -> Path:
        return self.prefix / "error.log"

    @property
    def connections_log(self) -> Path:
        """One line per request: connection serial, request number on it, end time, duration, status, bytes, request."""
        return self.prefix / "connections.log"

    @property
    def access_log(self) -> Path:
        return self.prefix / "access.log"

    @property
    def timing_log(self) -> Path:
        """One line per response: ``$msec $request_time $bytes_sent $body_bytes_sent $status "$request"``."""
        return self.prefix / "timing.log"

    def timings(self) -> list[tuple[float, float, int, int, int, str]]:
        """The parsed timing log: (end epoch, duration s, bytes sent, body bytes, status, request line)."""
        out = []
        for line in self.timing_log.read_text().splitlines():
            msec, duration, sent, body, status, request = line.split(" ", 5)
            out.append((float(msec), float(duration), int(sent), int(body), int(status), request.strip('"')))
        return out

    def served(self) -> list[tuple[int, int, int, str, str]]:
        """Per response: (body bytes sent, status, connection serial, Range header or "", request line)."""
        out = []
        for line in (self.prefix / "ranges.log").read_text().splitlines():
            body, status, connection, rest = line.split(" ", 3)
            quoted = rest.split('"')  # ['', range, ' ', request, '']
            asked = "" if quoted[1] == "-" else quoted[1]  # nginx logs an empty variable as -
            out.append((int(body), int(status), int(connection), asked, quoted[3]))
        return out

    def requests(self) -> list[tuple[int, int, float, float, int, int, str]]:
        """The parsed connections log: (connection, request number on it, start epoch, end epoch,
        status, body bytes, request line), one per request."""
        out = []
        for line in self.connections_log.read_text().splitlines():
            conn, number, msec, duration, status, body, request = line.split(" ", 6)
            end = float(msec)
            out.append((int(conn), int(number), end - float(duration), end, int(status), int(body),
                        request.strip('"')))
        return out

    def requests_once_served(self, size: int, timeout: float = 30.0) -> list[tuple]:
        """:meth:`requests` once the 200 and 206 answers logged carry ``size`` body bytes or more
        (or ``timeout`` seconds passed). nginx writes a request's line as it ends, and a client
        behind a proxy can have the last bytes (from the proxy's buffer) before a loaded machine
        lets nginx write it: a fixed 0.2 s wait read a log without it."""
        deadline = time.monotonic() + timeout
        while True:
            requests = self.requests()
            if sum(r[5] for r in requests if r[4] in (200, 206)) >= size or time.monotonic() > deadline:
                return requests
            time.sleep(0.05)

    def clients(self) -> list[tuple[str, int, int, str]]:
        """Per response: (the request's ``X-Client`` header or "", status, body bytes, request line)."""
        out = []
        for line in (self.prefix / "clients.log").read_text().splitlines():
            quoted = line.split('"')  # ['', client, ' status bytes ', request, '']
            status, body = quoted[2].split()
            out.append(("" if quoted[1] == "-" else quoted[1], int(status), int(body), quoted[3]))
        return out

    def url_for(self, name: str) -> str:
        return self.url + quote(name.lstrip("/"), safe="/")

    def start(self) -> NginxServer:
        if self.binary is None:
            raise RuntimeError("nginx is not installed (looked at $NGINX, PATH and "
                               f"{', '.join(_CANDIDATES)}); install it, e.g. apt-get install nginx")
        self.prefix = Path(tempfile.mkdtemp(prefix="nginx-test-"))
        (self.prefix / "tmp").mkdir()
        certificates = None
        if self.tls:
            from tests.origin_tls import make_certificates

            self.ca_path, chain, key = make_certificates(self.prefix)
            certificates = (chain, key)
        last_error = ""
        for _attempt in range(5):
            port = _free_port()
            conf = self.prefix / "nginx.conf"
            conf.write_text(_render_conf(prefix=self.prefix, root=self.root, port=port,
                                         limit_rate=self.limit_rate, limit_conn=self.limit_conn, tls=certificates,
                                         location=self.location))
            log = self.error_log
            log.write_text("")
            stderr_path = self.prefix / "stderr.log"
            with stderr_path.open("wb") as stderr:
                proc = subprocess.Popen(
                    [self.binary, "-c", str(conf), "-p", str(self.prefix) + "/", "-e", str(log)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                )
            if self._wait_ready(proc, port):
                self._proc, self.port = proc, port
                self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}/"
                return self
            stop_process(proc)
            last_error = (stderr_path.read_text(errors="replace")
                          + log.read_text(errors="replace")).strip()
            if "in use" not in last_error:
                break
        shutil.rmtree(self.prefix, ignore_errors=True)
        raise RuntimeError(f"nginx did not start: {last_error or 'no output'}")

    def _wait_ready(self, proc: subprocess.Popen, port: int) -> bool:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc)
        if self.prefix is not None:
            shutil.rmtree(self.prefix, ignore_errors=True)

    def __enter__(self) -> NginxServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
