"""`doctor` with http_proxy and https_proxy both set: all_proxy is overridden (get never reads it),
so it is reported as such, not tested (a dead or socks:// all_proxy is no failure then); with
only one of them set it is still tested. Real CLI; the live proxy is a loopback origin that
takes connections, the dead one a closed port."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_proxies import env_with

DEAD = "127.0.0.1:9"


def _proxy_checks(env) -> list[dict]:
    proc = run_cli("doctor", "--json", "--no-sources", "--deadline", "1", env=env)
    report = json.loads(proc.stdout)
    return [c for c in report["checks"] if c["topic"] == "proxy"]


@pytest.mark.parametrize("all_proxy", [f"http://{DEAD}", f"socks5://{DEAD}"])
def test_an_overridden_all_proxy_is_said_so_and_not_tested(home, all_proxy):
    with OriginServer() as live:
        env = env_with(http_proxy=live.url, https_proxy=live.url, all_proxy=all_proxy,
                       PIP_INDEX_URL=live.url + "simple/", UV_DEFAULT_INDEX=live.url + "simple/")
        checks = _proxy_checks(env)
    shown = json.dumps(checks, indent=1)
    about_all = [c for c in checks if "all_proxy" in json.dumps(c)]
    assert about_all and all(c["level"] == "info" for c in about_all), shown
    assert any("overridden" in json.dumps(c) for c in about_all), shown
    assert not any(c["level"] == "fail" for c in checks), shown


def test_all_proxy_with_only_http_proxy_set_is_still_tested(home):
    with OriginServer() as live:
        env = env_with(http_proxy=live.url, all_proxy=f"http://{DEAD}", PIP_INDEX_URL=live.url + "simple/",
                       UV_DEFAULT_INDEX=live.url + "simple/")
        checks = _proxy_checks(env)
    shown = json.dumps(checks, indent=1)
    assert any(c["level"] == "fail" and "(all_proxy) does not accept connections" in json.dumps(c)
               for c in checks), shown
