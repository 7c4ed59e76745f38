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
    """``http://a:b\\c@host:port`` passes Python's parser but not urllib3's (2.7 failed inside its
    parser, 2.8 ends the host at the backslash and quotes "'alice:Zq7'"): it is refused at once,
    in one line naming the variable and the fix, with no piece of the password."""
    env = env_with(http_proxy="http://alice:Zq7\\pw@127.0.0.1:9", no_proxy="example.invalid")
    proc = run_cli("get", origin.url_for("a.bin"), "-o", str(tmp_path / "a.bin"), env=env)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
    assert len(errors) == 1 and errors[0].startswith("prefetch: error: http_proxy='http://***@127.0.0.1:9'"), proc.stderr
    assert "percent-encode" in errors[0] and "\\" in errors[0]
    assert "Zq7" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "a.bin").exists()


def test_a_request_through_such_a_proxy_names_it_without_the_password(monkeypatch, origin):
    """The library's own request (no CLI check before it): the error names the proxy, and
    whatever the installed urllib3 quotes of the value, no piece of the password."""
    from prefetch.errors import NetworkError
    from prefetch.net.http import Client

    monkeypatch.setenv("http_proxy", "http://alice:Zq7\\pw@127.0.0.1:9")
    monkeypatch.setenv("no_proxy", "example.invalid")
    with pytest.raises(NetworkError) as caught:
        with Client() as client:
            client.request(origin.url_for("a.bin"))
    assert "through the proxy http://127.0.0.1:9" in str(caught.value)
    assert "Zq7" not in str(caught.value)


@pytest.mark.parametrize("value, said", [
    ("http://alice:Zq7\\pw@127.0.0.1:9", "Failed to parse: 'alice:Zq7' is not a valid host or port"),  # urllib3 2.8
    ("http://alice:Zq7pw/x@127.0.0.1:9", "Failed to parse: 'alice:Zq7pw' is not a valid host or port"),  # urllib3 2.8
    ("http://alice:Zq7pw/x@127.0.0.1:9", "Port could not be cast to integer value as 'Zq7pw'"),  # urllib.parse
    ("http://alice:Zq7pw/x@127.0.0.1:9", "Failed to parse: http://alice:Zq7pw/x@127.0.0.1:9"),  # urllib3 2.7
    ("socks5://bob@example.com:Zq7pw#x@127.0.0.1:9", "'example.com:Zq7pw' is not a valid port"),
])
def test_a_parser_s_words_keep_no_piece_of_a_proxy_password(value, said):
    """What urllib3 and urllib.parse each quote of a proxy value they cannot read (their words
    differ by version: 2.8 quotes the piece before a backslash or slash) loses every piece of
    the password; the user name alone stays."""
    from prefetch.net.proxies import hide_proxy_passwords

    shown = hide_proxy_passwords(said, {"HTTPS_PROXY": value})
    assert "Zq7" not in shown and "***" in shown
    assert hide_proxy_passwords("as alice or bob@example.com", {"http_proxy": value}) == "as alice or bob@example.com"
