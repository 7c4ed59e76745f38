"""A proxy that answers with its own page, through the real tinyproxy (issue 21, item 4).

* tinyproxy's ``Filter``: the origin's host is filtered, and tinyproxy answers ``403 Filtered``,
  its own HTML page;
* a portal-like upstream: tinyproxy forwards to an ``Upstream`` that answers every request with
  ``200 text/html``, a login page (as a campus proxy in front of a portal does).

Either is a failing source with the proxy named, never placed as the file, not the end of a run
that has another source; the proxy's password is never printed or stored; ``prefetch doctor``
says that the proxy is (or may be) what fails.
"""

from __future__ import annotations

import http.server
import threading

import pytest

from tests.conftest import run_cli
from tests.proxies import TinyProxy
from tests.test_jobs import job_id_from
from tests.test_proxies import DATA, PASSWORD, SHA, env_with, errors_of, everything_written

LOGIN = b"<html><head><title>Campus network login</title></head><body><form>user, password</form></body></html>"


class _LoginPage(http.server.BaseHTTPRequestHandler):
    """An upstream proxy that answers every request with a 200 login page."""

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(LOGIN)))
        self.end_headers()
        self.wfile.write(LOGIN)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def portal():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _LoginPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def filtering_proxy(tmp_path):
    """tinyproxy with credentials that filters 127.0.0.1 (a name not filtered: ``localhost``)."""
    rules = tmp_path / "filter"
    rules.write_text("^127\\.0\\.0\\.1$\n")
    with TinyProxy(tmp_path / "tinyproxy", user="alice", password=PASSWORD, extra=f'Filter "{rules}"\n') as server:
        yield server


@pytest.fixture
def portal_proxy(tmp_path, portal):
    """tinyproxy with credentials whose upstream answers every request with a login page."""
    extra = f"Upstream http 127.0.0.1:{portal.server_address[1]}\n"
    with TinyProxy(tmp_path / "tinyproxy", user="alice", password=PASSWORD, extra=extra) as server:
        yield server


def nothing_placed(tmp_path, name: str) -> None:
    assert not (tmp_path / name).exists()
    part = tmp_path / f"{name}.part"
    assert not part.exists() or b"<html" not in part.read_bytes()


def test_a_proxy_filter_page_is_a_failing_source_named(home, origin, filtering_proxy, tmp_path):
    origin.put("a.bin", DATA)
    proxy = filtering_proxy

    proc = run_cli("get", origin.url_for("a.bin"), "-P", str(tmp_path),
                   env=env_with(http_proxy=proxy.url_with_credentials))
    assert proc.returncode == 3, proc.stderr
    (error,) = errors_of(proc.stderr)
    assert f"the proxy {proxy.url} answered HTTP 403 with its own error page (403 Filtered)" in error, error
    assert PASSWORD not in proc.stdout + proc.stderr
    nothing_placed(tmp_path, "a.bin")
    assert "Filtered" in proxy.log() or "filtered" in proxy.log().lower()  # tinyproxy itself refused it

    # A failing source, not a failing run: the same file from a mirror the proxy lets through.
    mirror = origin.url.replace("127.0.0.1", "localhost")
    proc = run_cli("get", origin.url_for("a.bin"), "--mirror", mirror, "--also-origin", "--sha256", SHA,
                   "-P", str(tmp_path), env=env_with(http_proxy=proxy.url_with_credentials))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a.bin").read_bytes() == DATA


def test_a_login_page_from_the_proxy_is_never_placed_and_names_the_proxy(home, origin, portal_proxy, tmp_path):
    origin.put("a.bin", DATA)
    proxy = portal_proxy
    env = env_with(http_proxy=proxy.url_with_credentials)

    proc = run_cli("get", origin.url_for("a.bin"), "-P", str(tmp_path), env=env)
    assert proc.returncode == 3, proc.stderr
    (error,) = errors_of(proc.stderr)
    assert "a web page instead of the file" in error and f"through the proxy {proxy.url})" in error, error
    assert "proxy's login or block page" in error, error
    assert PASSWORD not in proc.stdout + proc.stderr
    nothing_placed(tmp_path, "a.bin")
    assert not origin.data_requests("a.bin")  # the origin was never reached: the page is the proxy's

    # The same as a background job: the reason in its status and log, the password nowhere.
    bg = run_cli("get", origin.url_for("a.bin"), "-P", str(tmp_path), "-b", env=env)
    assert bg.returncode == 0, bg.stderr
    job = job_id_from(bg.stdout + bg.stderr)
    waited = run_cli("wait", job, "--timeout", "60", env=env)
    assert waited.returncode == 3, waited.stdout + waited.stderr
    status = run_cli("status", job, "--json", env=env).stdout
    log = run_cli("log", job, env=env).stdout
    assert f"through the proxy {proxy.url}" in status + log, status + log
    for text in (bg.stdout, bg.stderr, waited.stdout, waited.stderr, status, log, everything_written(home)):
        assert PASSWORD not in text
    nothing_placed(tmp_path, "a.bin")


def test_doctor_names_the_proxy_for_its_filter_page_and_its_login_page(home, origin, filtering_proxy, portal,
                                                                        tmp_path, monkeypatch):
    origin.put("toy.bin", DATA)
    registry = tmp_path / "r.toml"
    registry.write_text(f'[toy]\n[[toy.files]]\nname = "toy.bin"\nurl = "{origin.url_for("toy.bin")}"\n')
    for name in ("PIP_INDEX_URL", "UV_DEFAULT_INDEX"):
        monkeypatch.setenv(name, origin.url + "simple/")
    monkeypatch.setenv("HF_ENDPOINT", origin.url)

    proc = run_cli("doctor", "toy", "--registry", str(registry), "--deadline", "2",
                   env=env_with(http_proxy=filtering_proxy.url_with_credentials))
    source = [line for line in proc.stdout.splitlines() if " source " in line]
    assert source and "blocked at proxy" in source[0] and "403 Filtered" in source[0], proc.stdout
    assert "the proxy is what fails" in proc.stdout
    assert PASSWORD not in proc.stdout + proc.stderr

    extra = f"Upstream http 127.0.0.1:{portal.server_address[1]}\n"
    with TinyProxy(tmp_path / "portal-proxy", user="alice", password=PASSWORD, extra=extra) as proxy:
        proc = run_cli("doctor", "toy", "--registry", str(registry), "--deadline", "2",
                       env=env_with(http_proxy=proxy.url_with_credentials))
    source = [line for line in proc.stdout.splitlines() if " source " in line]
    assert source and "captive portal" in source[0] and f"via proxy http://***@127.0.0.1:{proxy.port};" in source[0], proc.stdout
    assert "the proxy's login or block page (the proxy may be what fails)" in proc.stdout, proc.stdout
    assert PASSWORD not in proc.stdout + proc.stderr
