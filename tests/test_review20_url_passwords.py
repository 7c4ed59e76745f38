"""A password with a ``/``, ``?`` or ``#`` not percent-encoded, in a URL given to ``get`` or in a
proxy variable, never comes back in what prefetch prints (real CLI, real tinyproxy and origin
on 127.0.0.1).

Such a character ends the host for every parser (urlsplit, urllib3, a browser): what comes
before it is read as ``host:port``.

- ``get 'https://alice:Tr0ub4dor/3x@host/f'``: urlsplit finds the port ``Tr0ub4dor`` bad, and the
  refusal quoted the URL whole (``malformed URL 'https://alice:Tr0ub4dor/3x@...'``) and the
  parser's words (``... as 'Tr0ub4dor'``); the error line's scrub looks for a password up to an
  ``@`` with no ``/`` before it, so nothing was hidden.
- ``http_proxy=http://alice:8123/x@proxy:3128``: the part before the ``/`` is a number, a port
  that parses, so the proxy check let it pass and requests went to the host ``alice``, port 8123
  (while prefetch's messages named the proxy after the ``@``). It is refused at once now, as a
  ``/`` after letters was (exit 2, one line, the password hidden).
"""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.proxies import TinyProxy
from tests.test_bad_input import one_error_line
from tests.test_proxies import env_with


@pytest.fixture
def origin():
    with OriginServer() as server:
        server.put("a.bin", b"a" * 20_000)
        yield server


@pytest.mark.parametrize("cut", ["/", "?", "#"])
def test_a_url_whose_password_ends_its_host_is_refused_without_showing_it(home, tmp_path, origin, cut):
    host = origin.url_for("a.bin").partition("://")[2]
    url = f"http://alice:Tr0ub4dor{cut}3xQ@{host}"
    got = run_cli("get", url, "-o", str(tmp_path / "a.bin"), env=env_with())
    line = one_error_line(got, 2)
    assert "malformed URL" in line and "percent-encode" in line, line
    assert "Tr0ub4dor" not in got.stderr and "3xQ" not in got.stderr, got.stderr
    assert not (tmp_path / "a.bin").exists()


def test_a_proxy_whose_password_starts_with_a_number_before_a_slash_is_refused(home, tmp_path, origin):
    with TinyProxy(tmp_path / "tp") as proxy:
        value = f"http://alice:8123/Zq7pw@127.0.0.1:{proxy.port}"
        got = run_cli("get", origin.url_for("a.bin"), "-o", str(tmp_path / "a.bin"),
                      env=env_with(http_proxy=value, no_proxy="example.invalid"))
        line = one_error_line(got, 2)
        assert line.startswith("prefetch: error: http_proxy=") and "percent-encode" in line, line
        assert "8123" not in got.stderr and "Zq7pw" not in got.stderr, got.stderr
        assert "a.bin" not in proxy.log()
    assert not (tmp_path / "a.bin").exists()


@pytest.mark.parametrize("password", ["Sek'r1tPw", 'Sek"r1tPw', "Sek`r1tPw", "Sek\\r1tPw"])
def test_a_url_password_with_a_quote_or_a_backslash_is_not_printed(home, tmp_path, origin, password):
    """A quote ends the error line's scrub of a URL's password (a message quotes URLs in quotes):
    ``cannot tell a file name from "http://alice:Sek'r1tPw@host/"`` printed it whole. A backslash
    (fine for Python's parser) made urllib3 2.8 quote the password's first part ("Failed to parse:
    'alice:Sek' is not a valid host or port"; 2.7: "'NoneType' object has no attribute 'groups'",
    exit 3); it is refused at once now, as in a proxy variable."""
    host = origin.url_for("a.bin").partition("://")[2].partition("/")[0]
    for url in (f"http://alice:{password}@{host}/", f"http://alice:{password}@{host}/a.bin"):
        got = run_cli("get", url, "-P", str(tmp_path / "out"), env=env_with())
        assert "Sek" not in got.stdout + got.stderr and "r1tPw" not in got.stdout + got.stderr, got.stderr
        if url.endswith("/") or "\\" in password:
            one_error_line(got, 2)
    assert not (tmp_path / "out" / "a.bin").exists() or "\\" not in password
