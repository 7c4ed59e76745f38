"""Loading the CA bundle is not the route's round trip.

The TLS context of the direct path (``net/tls_context.py``) was built on the first https
connection, inside the first request's clock: certifi's bundle is ~30 ms of CPU, far more on a
loaded machine, and the probe to a near host then looked like a long route's (twice the 40 ms
mark): the connections a long route calls for, 31, were opened ahead of its answer
(``engine/preconnect.py``). Here the bundle is made slow to load (certifi's, several times over,
with the test CA; the long-route mark raised to 200 ms, which a loaded machine's handshake on
loopback stays under and the bundle's load does not) and a near https nginx (through a counting relay on loopback, no delay) is
asked for one file: now (``Client.prepare`` builds the context before the clock starts) the host
is judged near and gets the ramp's connections, not the long route's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.latency_proxy import LatencyProxy
from tests.nginx import NginxServer, nginx_binary

pytestmark = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")


def test_a_slow_trust_store_does_not_make_a_near_https_host_a_long_route(tmp_path):
    import certifi

    root = tmp_path / "www"
    root.mkdir()
    body = os.urandom(6 << 20)
    (root / "f.bin").write_bytes(body)
    with NginxServer(root, tls=True) as server:
        bundle = tmp_path / "bundle.pem"  # the test CA, then certifi's bundle 30 times: ~1 s to load, quiet
        bundle.write_text(server.ca_path.read_text() + Path(certifi.where()).read_text() * 30)
        with LatencyProxy(server.port, rtt=0.0) as relay:
            out = tmp_path / "out" / "f.bin"
            done = subprocess.run([sys.executable, "-m", "prefetch", "get", f"https://127.0.0.1:{relay.port}/f.bin",
                                   "-o", str(out)], capture_output=True, text=True, timeout=300,
                                  stdin=subprocess.DEVNULL, cwd=str(tmp_path),
                                  env=dict(os.environ, REQUESTS_CA_BUNDLE=str(bundle),
                                           PREFETCH_HOME=str(tmp_path / "home"),
                                           # (a long route from 200 ms: a loaded machine's TLS handshake on
                                           # loopback, both ends waiting for a CPU, stays short of it)
                                           PREFETCH_LONG_ROUTE="0.2"))
            connections = relay.connections
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert out.read_bytes() == body
    # Near: the probe and the ramp's first count (8) at most; judged long: the probe and 31 ahead.
    assert connections <= 9, connections
