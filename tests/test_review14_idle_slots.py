"""A process's idle connections to a host it is done with do not keep another process waiting.

Real ``prefetch get`` processes against two real nginx servers (engine/shared_budget.py).
"""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.helpers import start_cli
from tests.nginx import NginxServer, nginx_binary

MiB = 1 << 20
CAP = 4

pytestmark = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")


def test_warm_connections_of_a_host_done_with_make_room_for_another_process(home, tmp_path):
    """Job A fetched x.bin from host X on several connections and is now on a long file from
    host Y, its X connections kept warm (each holds a slot). Job B wants one file from X: it
    must not wait for A's whole run (it waited until A ended)."""
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    x_data = os.urandom(4 * MiB)
    (tmp_path / "x" / "x.bin").write_bytes(x_data)
    (tmp_path / "x" / "z.bin").write_bytes(z_data := os.urandom(256 << 10))
    (tmp_path / "y" / "y.bin").write_bytes(os.urandom(8 * MiB))
    env = dict(os.environ, PREFETCH_MIN_SPLIT=str(256 << 10))
    with NginxServer(tmp_path / "x", limit_rate="1m") as x, NginxServer(tmp_path / "y", limit_rate="24k") as y:
        listing = tmp_path / "list.txt"
        listing.write_text(f"{x.url_for('x.bin')}\n{y.url_for('y.bin')}\n")
        out_a = tmp_path / "a"
        a = start_cli("get", "-i", str(listing), "-P", str(out_a), "--host-connections", str(CAP), "-q",
                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        b = None
        try:
            deadline = time.monotonic() + 60
            while not ((out_a / "x.bin").exists() and (out_a / "x.bin").stat().st_size == len(x_data)):
                assert a.poll() is None and time.monotonic() < deadline, a.communicate()
                time.sleep(0.05)
            b = start_cli("get", x.url_for("z.bin"), "-o", str(tmp_path / "z.bin"), "--host-connections",
                          str(CAP), "-q", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            while b.poll() is None:
                assert a.poll() is None, ("job A ended first: job B waited for its whole run", b.communicate())
                time.sleep(0.05)
            assert b.returncode == 0, b.communicate()
            assert a.poll() is None  # (A is still on y.bin: B did not wait for it)
        finally:
            for proc in (a, b):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.communicate()
    assert (tmp_path / "z.bin").read_bytes() == z_data
