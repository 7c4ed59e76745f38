"""The requests-session path (a proxy, ``.netrc`` credentials) loads the CA bundle once per
process, as the direct path does (real tinyproxy, real https nginx on 127.0.0.1, a real
``prefetch get`` subprocess).

requests (2.32.3 on) hands urllib3 only ``ca_certs``: urllib3 built a new TLS context for every
new connection and loaded the bundle into it, inside that request's clock (certifi's bundle is
~30 ms of CPU, far more on a loaded machine), and every connection of the ramp paid it. Now the
session's pools use the one context per bundle of ``net/tls_context.py``. A ``sitecustomize``
on the subprocess's path counts ``SSLContext.load_verify_locations`` calls.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.nginx import NginxServer, nginx_binary
from tests.proxies import TinyProxy, tinyproxy_binary

pytestmark = pytest.mark.skipif(nginx_binary() is None or tinyproxy_binary() is None,
                                reason="nginx or tinyproxy is not installed")

COUNTER = '''
import os, ssl

_load = ssl.SSLContext.load_verify_locations


def load_verify_locations(self, cafile=None, capath=None, cadata=None):
    fd = os.open(os.environ["LOADS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, f"{cafile or capath or '(data)'}\\n".encode())
    os.close(fd)
    return _load(self, cafile, capath, cadata)


ssl.SSLContext.load_verify_locations = load_verify_locations
'''


@pytest.fixture
def site(tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(COUNTER)
    return folder


def _get(tmp_path, site, url: str, **env) -> subprocess.CompletedProcess:
    loads = tmp_path / "loads.log"
    environment = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy",
                                                                             "no_proxy", "netrc")}
    environment.update(PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
                       LOADS_LOG=str(loads), PREFETCH_HOME=str(tmp_path / "home"), **env)
    return subprocess.run([sys.executable, "-m", "prefetch", "get", url, "-o", str(tmp_path / "out" / "f.bin"),
                           "--connections", "8"], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, cwd=str(tmp_path), env=environment)


def _loads(tmp_path) -> list[str]:
    path = tmp_path / "loads.log"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("route", ["proxy", "netrc", "proxy, a bundle folder"])
def test_a_multi_connection_https_download_on_the_session_path_loads_the_bundle_once(tmp_path, site, route):
    root = tmp_path / "www"
    root.mkdir()
    body = os.urandom(4 << 20)
    (root / "f.bin").write_bytes(body)
    with NginxServer(root, tls=True, limit_rate="512k") as server, TinyProxy(tmp_path / "proxy") as proxy:
        bundle = str(server.ca_path)
        if route.endswith("folder"):  # REQUESTS_CA_BUNDLE a folder of hashed certificates: capath
            folder = tmp_path / "certs"
            folder.mkdir()
            (folder / "ca.pem").write_bytes(server.ca_path.read_bytes())
            subprocess.run(["openssl", "rehash", str(folder)], check=True, capture_output=True)
            bundle = str(folder)
        env = {"REQUESTS_CA_BUNDLE": bundle}
        if route.startswith("proxy"):
            env["HTTPS_PROXY"] = proxy.url
        else:
            netrc = tmp_path / "netrc"
            netrc.write_text("machine 127.0.0.1 login alice password s3cret\n")
            netrc.chmod(0o600)
            env["NETRC"] = str(netrc)
        done = _get(tmp_path, site, server.url_for("f.bin"), **env)
        connections = {row[2] for row in server.served()}
        tunnelled = proxy.log().count("CONNECT")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "f.bin").read_bytes() == body
    assert len(connections) >= 3, server.served()  # several connections, each a TLS handshake
    if route.startswith("proxy"):
        assert tunnelled >= 3, proxy.log()  # (they went through the proxy)
    loads = _loads(tmp_path)
    assert loads == [bundle], (loads, len(connections))  # one load of the bundle for them all


def test_a_wrong_ca_through_the_proxy_still_fails_with_the_tls_exit_code(tmp_path, site):
    import certifi

    root = tmp_path / "www"
    root.mkdir()
    (root / "f.bin").write_bytes(os.urandom(1 << 16))
    with NginxServer(root, tls=True) as server, TinyProxy(tmp_path / "proxy") as proxy:
        done = _get(tmp_path, site, server.url_for("f.bin"), HTTPS_PROXY=proxy.url, REQUESTS_CA_BUNDLE=certifi.where())
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "certificate" in done.stderr.lower(), done.stderr
    assert not (tmp_path / "out" / "f.bin").exists()
