"""``prefetch doctor`` must decide proxy and CA bundle as ``get`` does (a hostile review of proxies).

A source ``get`` fetches directly (its host in ``no_proxy`` by a CIDR block or host:port, or
``no_proxy`` preferred to ``NO_PROXY`` as requests does) must not be reported blocked at a
proxy, and a CA bundle ``get`` honours (``CURL_CA_BUNDLE``, a directory) must not make doctor
report a TLS failure. Real CLI, real servers on 127.0.0.1; the proxy is a dead port, so any
probe through it fails.
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_proxies import env_with

DATA = random.Random(93).randbytes(50_000)
DEAD_PROXY = "http://127.0.0.1:9"


def _registry(tmp_path, url):
    registry = tmp_path / "r.toml"
    sha = hashlib.sha256(DATA).hexdigest()
    registry.write_text(f'[toy]\n[[toy.files]]\nname = "toy.bin"\nurl = "{url}"\nsha256 = "{sha}"\n')
    return registry


def _source_line(proc) -> str:
    lines = [line for line in proc.stdout.splitlines() if " source " in line]
    assert lines, proc.stdout + proc.stderr
    return lines[0]


@pytest.mark.parametrize("no_proxy", ["127.0.0.0/8", ".0.0.1", "localhost,127.0.0.1"])
def test_doctor_and_get_agree_on_no_proxy_forms(home, tmp_path, monkeypatch, no_proxy):
    with OriginServer() as origin:
        origin.put("toy.bin", DATA)
        for name in ("PIP_INDEX_URL", "UV_DEFAULT_INDEX"):
            monkeypatch.setenv(name, origin.url + "simple/")
        registry = _registry(tmp_path, origin.url_for("toy.bin"))
        listed = no_proxy.format(port=origin.port)
        # lower case no_proxy wins over NO_PROXY in requests, whatever NO_PROXY says
        env = env_with(http_proxy=DEAD_PROXY, no_proxy=listed, NO_PROXY="example.invalid")

        got = run_cli("get", origin.url_for("toy.bin"), "-o", str(tmp_path / "toy.bin"), "-q", env=env)
        assert got.returncode == 0, got.stderr  # get goes direct

        proc = run_cli("doctor", "toy", "--registry", str(registry), "--deadline", "2", env=env)
        line = _source_line(proc)
        assert "proxy" not in line and "blocked" not in line, line


def test_doctor_ignores_no_proxy_upper_case_when_lower_case_is_set(home, tmp_path, monkeypatch):
    """NO_PROXY lists the host but no_proxy (set, and read first) does not: get uses the proxy; so must doctor."""
    with OriginServer() as origin:
        origin.put("toy.bin", DATA)
        for name in ("PIP_INDEX_URL", "UV_DEFAULT_INDEX"):
            monkeypatch.setenv(name, origin.url + "simple/")
        registry = _registry(tmp_path, origin.url_for("toy.bin"))
        env = env_with(http_proxy=DEAD_PROXY, no_proxy="example.invalid", NO_PROXY="127.0.0.1")

        got = run_cli("get", origin.url_for("toy.bin"), "-o", str(tmp_path / "toy.bin"), "-q", env=env)
        assert got.returncode == 3, got.stderr  # through the dead proxy
        proc = run_cli("doctor", "toy", "--registry", str(registry), "--deadline", "2", env=env)
        assert "proxy" in _source_line(proc), proc.stdout


@pytest.mark.parametrize("variable", ["CURL_CA_BUNDLE", "SSL_CERT_DIR"])
def test_doctor_trusts_the_ca_bundle_get_trusts(home, tmp_path, monkeypatch, variable):
    with OriginServer(tls=True) as origin:
        origin.put("toy.bin", DATA)
        for name in ("PIP_INDEX_URL", "UV_DEFAULT_INDEX"):
            monkeypatch.setenv(name, "http://127.0.0.1:9/simple/")
        registry = _registry(tmp_path, origin.url_for("toy.bin"))
        env = env_with()
        for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
            env.pop(name, None)
        if variable == "SSL_CERT_DIR":
            cadir = tmp_path / "cadir"
            cadir.mkdir()
            (cadir / "ca.pem").write_bytes(origin.ca_path.read_bytes())
            subprocess.run(["openssl", "rehash", str(cadir)], check=True)
            env[variable] = str(cadir)
        else:
            env[variable] = str(origin.ca_path)

        got = run_cli("get", origin.url_for("toy.bin"), "-o", str(tmp_path / "toy.bin"), "-q", env=env)
        assert got.returncode == 0, got.stderr
        proc = run_cli("doctor", "toy", "--registry", str(registry), "--deadline", "2", env=env)
        line = _source_line(proc)
        assert "tls" not in line.lower() and "blocked" not in line, line


_URLS = ["http://127.0.0.1:8080/a", "https://files.example.com/a", "http://example.com:8080/a",
         "https://[::1]:8443/a", "http://10.1.2.3/a", "https://EXAMPLE.com/a"]
_ENVS = [
    {"https_proxy": "http://p:1", "http_proxy": "http://q:2"},
    {"all_proxy": "http://u:pw@p:1", "no_proxy": "*"},
    {"HTTPS_PROXY": "http://upper:1", "https_proxy": "http://lower:1"},
    {"http_proxy": "http://p:1", "https_proxy": "http://p:1", "no_proxy": ".example.com"},
    {"http_proxy": "http://p:1", "no_proxy": "example.com:8080"},
    {"http_proxy": "http://p:1", "no_proxy": "127.0.0.0/8, 10.0.0.0/8"},
    {"https_proxy": "http://p:1", "no_proxy": "[::1]"},
    {"https_proxy": "http://p:1", "no_proxy": "::1"},
    {"http_proxy": "http://p:1", "no_proxy": "x.invalid", "NO_PROXY": "127.0.0.1,10.1.2.3"},
    {"http_proxy": "http://p:1", "NO_PROXY": "127.0.0.1, EXAMPLE.COM"},
    {"http_proxy": "http://p:1", "https_proxy": "", "all_proxy": "http://a:3"},
    {"HTTP_PROXY": "http://cgi:1", "REQUEST_METHOD": "GET"},
    {"https_proxy": "http://p:1", "no_proxy": "example.com"},
]


@pytest.mark.parametrize("env", _ENVS, ids=range(len(_ENVS)))
def test_proxy_in_an_environment_is_what_requests_chooses_there(monkeypatch, env):
    """doctor reads a mapping, requests os.environ: the same variables give the same proxy."""
    from requests.utils import get_environ_proxies, select_proxy

    from prefetch.net.proxies import proxy_in

    for name in list(os.environ):
        if name.lower().endswith("_proxy") or name == "REQUEST_METHOD":
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for url in _URLS:
        assert proxy_in(url, dict(env)) == (select_proxy(url, get_environ_proxies(url)) or None), (url, env)
        assert proxy_in(url, os.environ) == proxy_in(url, dict(env)), (url, env)
