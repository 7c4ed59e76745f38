"""A CA bundle that cannot be loaded (``REQUESTS_CA_BUNDLE`` naming a file that holds no
certificate: a truncated download of a corporate bundle, the wrong file) is one ``TLS error``
line and exit 3 (docs/exit-codes.md), as before the eighteenth sitting (a real https origin on
127.0.0.1, a real ``prefetch get``).

``Client.prepare`` builds the TLS context before the first request's clock starts (d9d172c),
outside the request's error handling: OpenSSL's "no certificate or crl found" came out as
``internal error: SSLError(SSLError(136, ...))``, exit 1. The build there is only a warm-up;
when it fails, the connection's own build says why, as the request's TLS error.
"""

from __future__ import annotations

import os
import random
from contextlib import ExitStack

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_bad_input import one_error_line

DATA = random.Random(19).randbytes(20_000)


@pytest.fixture
def origin():
    with OriginServer(tls=True) as server:
        server.put("d.bin", DATA)
        yield server


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_a_bundle_with_no_certificate_is_a_tls_error_not_an_internal_one(origin, home, tmp_path, variable):
    bundle = tmp_path / "corporate-ca.pem"
    bundle.write_text("this is not a certificate\n")
    env = {k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE")}
    env[variable] = str(bundle)
    got = run_cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), "-q", env=env, cwd=tmp_path)
    line = one_error_line(got, 3)
    assert "TLS error" in line and "internal error" not in line, line
    assert not (tmp_path / "d.bin").exists()


@pytest.mark.parametrize("route", ["netrc", "proxy"])
def test_the_same_bundle_on_the_session_path_is_the_same_tls_error(origin, home, tmp_path, route):
    """The requests-session path (``.netrc`` credentials for the host, a proxy variable) warms the
    one TLS context of its bundle in ``Client.prepare`` too (471ae14): the same bundle was
    ``internal error: SSLError(...)``, exit 1, there."""
    bundle = tmp_path / "corporate-ca.pem"
    bundle.write_text("this is not a certificate\n")
    env = {k: v for k, v in os.environ.items() if k.lower() not in (
        "requests_ca_bundle", "curl_ca_bundle", "ssl_cert_file", "netrc", "http_proxy", "https_proxy", "all_proxy",
        "no_proxy")}
    env["REQUESTS_CA_BUNDLE"] = str(bundle)
    with ExitStack() as stack:
        if route == "proxy":
            from tests.proxies import TinyProxy, tinyproxy_binary

            if tinyproxy_binary() is None:
                pytest.skip("tinyproxy is not installed (bash tests/run.sh installs it)")
            env["HTTPS_PROXY"] = stack.enter_context(TinyProxy(tmp_path / "proxy")).url
        else:
            netrc = tmp_path / "netrc"
            netrc.write_text("machine 127.0.0.1 login alice password s3cret\n")
            netrc.chmod(0o600)
            env["NETRC"] = str(netrc)
        got = run_cli("get", origin.url_for("d.bin"), "-o", str(tmp_path / "d.bin"), "-q", env=env, cwd=tmp_path)
    line = one_error_line(got, 3)
    assert "TLS error" in line and "internal error" not in line, line
    assert "s3cret" not in got.stderr + got.stdout
    assert not (tmp_path / "d.bin").exists()
