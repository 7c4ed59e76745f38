"""A ``~/.netrc`` that is not UTF-8 text (a password typed in a latin-1 editor) is one line, not a crash.

requests' ``get_netrc_auth`` ignores a netrc it cannot parse or open, but not one Python
cannot decode: the ``UnicodeDecodeError`` came out of prefetch as "internal error" (exit 1).
It is now one line naming the file (exit 3); a netrc that parses, or a malformed one that
requests ignores, behaves as before. Real CLI, an origin asking for Basic auth on 127.0.0.1.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer

DATA = b"n" * 9_000


@pytest.fixture
def origin():
    with OriginServer() as server:
        server.put("l.bin", DATA)
        server.basic_auth = ("alice", "pa55")
        yield server


def test_a_netrc_that_is_not_utf8_is_one_line(home, tmp_path, origin):
    netrc = home / ".netrc"
    netrc.write_bytes(b"machine 127.0.0.1 login alice password caf\xe9\n")
    netrc.chmod(0o600)
    out = tmp_path / "l.bin"
    proc = run_cli("get", origin.url_for("l.bin"), "-o", str(out))
    assert proc.returncode == 3, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("prefetch: error:")]
    assert len(errors) == 1 and "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert str(netrc) in errors[0] and "caf" not in errors[0], errors[0]
    assert not out.exists()


def test_a_malformed_netrc_is_ignored_as_requests_does(home, tmp_path, origin):
    (home / ".netrc").write_text("machine 127.0.0.1 login alice password\n")
    proc = run_cli("get", origin.url_for("l.bin"), "-o", str(tmp_path / "l.bin"))
    assert proc.returncode == 3 and "answered HTTP 401" in proc.stderr, proc.stderr
