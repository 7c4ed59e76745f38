"""A proxy password is never printed, however the proxy variable is spelled (a hostile review of proxies).

Users paste passwords as they are: a ``/``, ``?`` or ``#`` not percent-encoded, a user name
that is an e-mail address (``alice@corp.cn:PASSWORD@proxy``). Python's URL parser then cuts
the authority in the wrong place, and its words ("Port could not be cast to integer value as
'<a piece of the password>'"), requests' ("Failed to parse: <the whole value>") or a
redaction that stops at the first ``@`` or ``/`` showed the password. Real CLI (``get`` and
``doctor``), a real origin on 127.0.0.1 and a proxy address nothing listens on.
"""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_proxies import env_with

SECRET = "Zq7pw"
DEAD = "127.0.0.1:9"
VALUES = [
    f"http://alice:ab/{SECRET}@{DEAD}",  # a "/" in the password
    f"http://alice:{SECRET}/x@{DEAD}",
    f"http://alice:{SECRET}#x@{DEAD}",  # "#" and "?" end the authority for the parser
    f"http://alice:{SECRET}?x@{DEAD}",
    f"socks5://alice:{SECRET}/x@{DEAD}",
    f"http://alice@corp.cn:{SECRET}@{DEAD}",  # an e-mail address as the user name
    f"http://alice:{SECRET}@[::1",
]


@pytest.fixture(scope="module")
def origin():
    with OriginServer() as server:
        server.put("toy.bin", b"x" * 5000)
        yield server


@pytest.mark.parametrize("value", VALUES)
def test_get_and_doctor_never_show_a_proxy_password(home, tmp_path, origin, value):
    registry = tmp_path / "r.toml"
    registry.write_text(f'[toy]\n[[toy.files]]\nname = "toy.bin"\nurl = "{origin.url_for("toy.bin")}"\n')
    env = env_with(http_proxy=value, https_proxy=value, PIP_INDEX_URL=origin.url + "simple/",
                   UV_DEFAULT_INDEX=origin.url + "simple/")

    got = run_cli("get", origin.url_for("toy.bin"), "-o", str(tmp_path / "toy.bin"), env=env)
    assert got.returncode in (2, 3), got.stderr
    assert "Traceback" not in got.stderr
    assert [line for line in got.stderr.splitlines() if line.startswith("prefetch: error:")], got.stderr
    assert SECRET not in got.stdout + got.stderr, got.stderr
    assert not (tmp_path / "toy.bin").exists()

    doctor = run_cli("doctor", "toy", "--registry", str(registry), "--deadline", "1", env=env)
    assert "Traceback" not in doctor.stderr
    assert "proxy" in doctor.stdout
    assert SECRET not in doctor.stdout + doctor.stderr, doctor.stdout
