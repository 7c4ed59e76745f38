"""A proxy variable without ``http://`` (``https_proxy=proxy.corp:3128``, ``alice:pw@proxy:3128``).

requests (urllib3's parser) reads what comes before the first ``:`` as the scheme when it
starts with a letter, so such a proxy is "malformed and could be missing the host" on every
request: prefetch retried that as connection trouble for many seconds. It is refused at once
now, in one line naming the variable and the fix; ``127.0.0.1:7890`` (no letter first) is
what requests accepts, and works. Real CLI, real tinyproxy and origin on 127.0.0.1.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.proxies import TinyProxy
from tests.test_proxies import env_with


@pytest.fixture
def origin():
    with OriginServer() as server:
        server.put("a.bin", b"a" * 20_000)
        yield server


@pytest.mark.parametrize("spelling", ["localhost:{port}", "alice:Zq7pw@127.0.0.1:{port}"])
def test_a_proxy_without_a_scheme_that_requests_misreads_is_one_line_at_once(home, tmp_path, origin, spelling):
    with TinyProxy(tmp_path / "tp") as proxy:
        value = spelling.format(port=proxy.port)
        env = env_with(http_proxy=value)
        env.pop("PREFETCH_RETRIES", None)  # the default retries: a misread proxy must not be retried at all
        proc = run_cli("get", origin.url_for("a.bin"), "-o", str(tmp_path / "a.bin"), env=env)
        assert proc.returncode == 2, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(errors) == 1 and errors[0].startswith("prefetch: error: http_proxy="), proc.stderr
        assert "http://" in errors[0] and "Zq7pw" not in proc.stderr
        assert "retry" not in proc.stderr
        assert not (tmp_path / "a.bin").exists()


def test_an_address_and_port_without_a_scheme_works(home, tmp_path, origin):
    with TinyProxy(tmp_path / "tp") as proxy:
        env = env_with(http_proxy=f"127.0.0.1:{proxy.port}", no_proxy="example.invalid")
        proc = run_cli("get", origin.url_for("a.bin"), "-o", str(tmp_path / "a.bin"), "-q", env=env)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "a.bin").read_bytes() == b"a" * 20_000
        assert "a.bin" in proxy.log()  # it did go through the proxy


def test_the_library_refuses_it_in_one_error_too(home, monkeypatch, origin):
    """Without the CLI's up-front check (the library, a job): a NetworkError, not a retried failure."""
    from prefetch.errors import NetworkError
    from prefetch.net.failures import TransientHTTPError
    from prefetch.net.http import Client

    monkeypatch.setenv("http_proxy", "corpproxy:3128")
    monkeypatch.setenv("no_proxy", "example.invalid")
    with Client() as client, pytest.raises(NetworkError) as caught:
        client.request(origin.url_for("a.bin"))
    assert not isinstance(caught.value, TransientHTTPError)
    assert "write it as http://corpproxy:3128" in str(caught.value)


def test_a_proxy_value_urllib3_cannot_parse_is_named_as_the_proxy(home, tmp_path, origin):
    """``http://a:b\\c@host:port`` passes Python's parser but not urllib3's: the one line says the
    request went through that proxy (before, it blamed only the file's URL), and no password."""
    env = env_with(http_proxy="http://alice:Zq7\\pw@127.0.0.1:9", no_proxy="example.invalid")
    proc = run_cli("get", origin.url_for("a.bin"), "-o", str(tmp_path / "a.bin"), env=env)
    assert proc.returncode == 3, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
    assert len(errors) == 1 and "through the proxy http://127.0.0.1:9" in errors[0], proc.stderr
    assert "Zq7" not in proc.stderr and "Traceback" not in proc.stderr
