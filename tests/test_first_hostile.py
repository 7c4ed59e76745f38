"""A new user's first ten minutes, as their machines are: ``prefetch demo``, ``doctor`` and
``--help`` run as real processes in environments the suite's fixtures do not give them."""

from __future__ import annotations

import os

_PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
               "no_proxy", "NO_PROXY")


def test_demo_reaches_its_own_local_origin_directly_whatever_proxy_is_set(cli, home):
    # A notebook machine behind a (here dead) proxy, and no no_proxy at all: the demo's origin
    # is its own, on 127.0.0.1, and "needs no network" must hold.
    env = {k: v for k, v in os.environ.items() if k not in _PROXY_VARS}
    env.update(http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9", all_proxy="socks5://127.0.0.1:9",
               HTTP_PROXY="http://127.0.0.1:9", ALL_PROXY="http://127.0.0.1:9")
    result = cli("demo", env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "demo ok: every file verified and in place" in result.stdout
    assert "through the proxy" not in result.stdout + result.stderr
