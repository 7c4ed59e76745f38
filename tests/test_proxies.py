"""Downloads through a real proxy (issue 21, item 4): Debian's tinyproxy on loopback.

``https_proxy`` (a CONNECT tunnel to the HTTPS test origin), ``http_proxy``, ``all_proxy``
and ``no_proxy``; proxy credentials that are never printed or stored (foreground and
background job); a proxy that fails (no or wrong credentials, its own error page, not
running) is a failing source with the proxy named; ``prefetch doctor`` says when the
proxy is what fails. Every test runs the real CLI.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.proxies import TinyProxy
from tests.test_faults import fault_env
from tests.test_jobs import job_id_from

PASSWORD = "pr0xy-s3cret"
DATA = random.Random(41).randbytes(600_000)
SHA = hashlib.sha256(DATA).hexdigest()
_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
               "NO_PROXY")


@pytest.fixture
def proxy(tmp_path):
    with TinyProxy(tmp_path / "tinyproxy", user="alice", password=PASSWORD) as server:
        yield server


def env_with(**proxies: str) -> dict[str, str]:
    env = {k: v for k, v in fault_env(PREFETCH_RETRIES="1").items() if k not in _PROXY_VARS}
    env.update(proxies)
    return env


def everything_written(home: Path) -> str:
    """Every file under the test's homes (job records, logs, state, placed records), as text."""
    texts = []
    for path in home.rglob("*"):
        if path.is_file() and path.stat().st_size < 5 << 20:
            texts.append(path.read_bytes().decode("latin-1"))
    return "\n".join(texts)


def errors_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error:")]


def test_https_through_a_proxy_with_credentials_in_the_foreground_and_as_a_job(home, tls_origin, proxy, tmp_path):
    tls_origin.put("a.bin", DATA)
    env = env_with(https_proxy=proxy.url_with_credentials)

    fg = run_cli("get", tls_origin.url_for("a.bin"), "--sha256", SHA, "-P", str(tmp_path / "fg"), env=env)
    assert fg.returncode == 0, fg.stderr
    assert (tmp_path / "fg" / "a.bin").read_bytes() == DATA
    assert f"CONNECT 127.0.0.1:{tls_origin.port}" in proxy.log() or "CONNECT" in proxy.log()

    bg = run_cli("get", tls_origin.url_for("a.bin"), "--sha256", SHA, "-P", str(tmp_path / "bg"), "-b", env=env)
    assert bg.returncode == 0, bg.stderr
    job = job_id_from(bg.stdout + bg.stderr)
    waited = run_cli("wait", job, "--timeout", "60", env=env)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (tmp_path / "bg" / "a.bin").read_bytes() == DATA
    shown = run_cli("status", job, "--json", env=env).stdout + run_cli("log", job, env=env).stdout

    # The password is nowhere: not printed, not in the job's record, log or any state file.
    for text in (fg.stdout, fg.stderr, bg.stdout, bg.stderr, waited.stdout, shown, everything_written(home)):
        assert PASSWORD not in text


def test_all_proxy_carries_both_schemes_and_no_proxy_goes_direct(home, origin, tls_origin, proxy, tmp_path):
    origin.put("h.bin", DATA)
    tls_origin.put("s.bin", DATA)
    env = env_with(all_proxy=proxy.url_with_credentials)
    proc = run_cli("get", origin.url_for("h.bin"), tls_origin.url_for("s.bin"), "-P", str(tmp_path / "all"), env=env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "all" / "h.bin").read_bytes() == DATA and (tmp_path / "all" / "s.bin").read_bytes() == DATA
    log = proxy.log()
    assert f"GET {origin.url_for('h.bin')}" in log and "CONNECT" in log  # both went through the proxy

    # no_proxy: the origin is reached directly, even with a proxy variable naming a dead proxy.
    dead = "http://alice:%s@127.0.0.1:9" % PASSWORD
    env = env_with(http_proxy=dead, https_proxy=dead, no_proxy="localhost,127.0.0.1")
    proc = run_cli("get", origin.url_for("h.bin"), "-P", str(tmp_path / "direct"), env=env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "direct" / "h.bin").read_bytes() == DATA


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_missing_or_wrong_proxy_credentials_are_named_and_final(home, origin, tls_origin, proxy, tmp_path, scheme):
    server = origin if scheme == "http" else tls_origin
    server.put("a.bin", DATA)
    variable = f"{scheme}_proxy"

    proc = run_cli("get", server.url_for("a.bin"), "-P", str(tmp_path), env=env_with(**{variable: proxy.url}))
    assert proc.returncode == 3, proc.stderr
    (error,) = errors_of(proc.stderr)
    assert f"the proxy {proxy.url} asks for a user name and password (HTTP 407)" in error
    assert f"{variable}=http://USER:PASSWORD@" in error
    assert "retry" not in proc.stderr  # final: asking again does not add credentials

    wrong = proxy.url_with_credentials.replace(PASSWORD, "not-the-" + PASSWORD)
    proc = run_cli("get", server.url_for("a.bin"), "-P", str(tmp_path), env=env_with(**{variable: wrong}))
    assert proc.returncode == 3, proc.stderr
    (error,) = errors_of(proc.stderr)
    assert "refused the user name and password" in error and PASSWORD not in proc.stderr
    assert not (tmp_path / "a.bin").exists()


def test_a_proxy_error_page_or_a_dead_proxy_is_a_failing_source_named(home, origin, proxy, tmp_path):
    origin.put("a.bin", DATA)
    unreachable = "http://127.0.0.1:9/a.bin"  # the proxy cannot reach it: it answers its own error page

    proc = run_cli("get", unreachable, "-P", str(tmp_path), env=env_with(http_proxy=proxy.url_with_credentials))
    assert proc.returncode == 3, proc.stderr
    (error,) = errors_of(proc.stderr)
    assert f"the proxy {proxy.url} answered HTTP 500 with its own error page" in error, error
    assert PASSWORD not in proc.stderr

    # The proxy's page for one source does not stop another (a mirror reached directly).
    env = env_with(http_proxy=proxy.url_with_credentials, no_proxy="localhost")
    proc = run_cli("get", unreachable, "--mirror", origin.url.replace("127.0.0.1", "localhost"), "--also-origin",
                   "-P", str(tmp_path), env=env)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a.bin").read_bytes() == DATA

    proxy.stop()  # not running at all
    proc = run_cli("get", origin.url_for("a.bin"), "-o", str(tmp_path / "b.bin"),
                   env=env_with(http_proxy=proxy.url_with_credentials))
    assert proc.returncode == 3, proc.stderr
    (error,) = errors_of(proc.stderr)
    assert f"the proxy {proxy.url}: Connection refused" in error and PASSWORD not in proc.stderr
    assert "never reached" in error and "*_proxy" in error, error  # (a proxy that refuses: net/unreachable.py)


def test_doctor_says_when_the_proxy_is_what_fails(home, origin, proxy, tmp_path, monkeypatch):
    origin.put("toy.bin", DATA)
    registry = tmp_path / "r.toml"
    registry.write_text(f'[toy]\n[[toy.files]]\nname = "toy.bin"\nurl = "{origin.url_for("toy.bin")}"\n')
    for name in ("PIP_INDEX_URL", "UV_DEFAULT_INDEX"):
        monkeypatch.setenv(name, origin.url + "simple/")

    # A proxy that wants credentials it was not given: the source is blocked at the proxy.
    env = env_with(http_proxy=proxy.url)
    proc = run_cli("doctor", "toy", "--registry", str(registry), "--deadline", "2", env=env)
    source = [line for line in proc.stdout.splitlines() if " source " in line]
    assert source and "blocked at proxy" in source[0] and "407" in source[0], proc.stdout
    assert "the proxy is what fails" in proc.stdout

    # A proxy that is not running: its own check fails, and the password is not shown.
    proxy.stop()
    env = env_with(http_proxy=proxy.url_with_credentials)
    proc = run_cli("doctor", "toy", "--registry", str(registry), "--deadline", "2", env=env)
    assert f"the proxy 127.0.0.1:{proxy.port} (http_proxy) does not accept connections" in proc.stdout, proc.stdout
    assert "http_proxy=http://***@127.0.0.1" in proc.stdout
    assert PASSWORD not in proc.stdout + proc.stderr
    assert "blocked at proxy" in proc.stdout


def test_url_credentials_travel_to_a_job_but_are_never_stored(home, origin, tmp_path):
    """``https://user:password@host/`` is handled as ``--header`` values are (issue 21, item 6)."""
    origin.put("private.bin", DATA)
    url = origin.url_for("private.bin").replace("http://", f"http://alice:{PASSWORD}@")

    bg = run_cli("get", url, "--sha256", SHA, "-P", str(tmp_path), "-b")
    assert bg.returncode == 0, bg.stderr
    job = job_id_from(bg.stdout + bg.stderr)
    waited = run_cli("wait", job, "--timeout", "60")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (tmp_path / "private.bin").read_bytes() == DATA
    assert any(r.headers.get("Authorization", "").startswith("Basic ") for r in origin.data_requests("private.bin"))
    status = run_cli("status", job, "--json").stdout
    assert "alice:***@" in status
    for text in (bg.stdout, bg.stderr, waited.stdout, status, run_cli("log", job).stdout, everything_written(home)):
        assert PASSWORD not in text

    # A resumed job cannot send a password it never stored: refused in one line, as for --header.
    resumed = run_cli("resume", job)
    assert resumed.returncode == 2 and "password is never stored" in resumed.stderr, resumed.stderr


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/f", "https://LocalHost/f", "http://[::1]:81/f",
                                 "http://files.example.org/f", "http://example.org:99999/f", "http://user:pw@127.0.0.1/f"])
@pytest.mark.parametrize("no_proxy", ["127.0.0.1,localhost", " ::1 , example.org", "10.0.0.0/8,127.0.0.1",
                                      "files.example.org", ".example.org", "*", ""])
def test_no_proxy_names_is_true_only_where_requests_finds_no_proxy(monkeypatch, url, no_proxy):
    """Where net/proxies.py's shortcut says "no proxy" without importing requests, requests says so too."""
    from requests.utils import get_environ_proxies

    from prefetch.net.proxies import no_proxy_names

    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    monkeypatch.setenv("https_proxy", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    monkeypatch.delenv("no_proxy", raising=False)
    if no_proxy_names(url):
        assert get_environ_proxies(url) == {}
    exact = no_proxy.replace(" ", "") in ("127.0.0.1,localhost", "::1,example.org", "10.0.0.0/8,127.0.0.1",
                                          "files.example.org")
    # the cases it is meant for are taken (a host named as it is, and a port that parses)
    assert no_proxy_names(url) == (exact and url in {
        "127.0.0.1,localhost": ("http://127.0.0.1:8080/f", "https://LocalHost/f", "http://user:pw@127.0.0.1/f"),
        "::1,example.org": ("http://[::1]:81/f",),
        "10.0.0.0/8,127.0.0.1": ("http://127.0.0.1:8080/f", "http://user:pw@127.0.0.1/f"),
        "files.example.org": ("http://files.example.org/f",),
    }.get(no_proxy.replace(" ", ""), ()))
