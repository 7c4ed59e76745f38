"""The ``prefetch`` process leaves without the interpreter's teardown, with its command's code.

``prefetch.cli.run`` (the console script and ``python -m prefetch``) runs the exit
handlers, flushes the streams and ends the process: the teardown that frees every
module one by one is skipped (start-up and exit are most of a fast ``get``), and after a
failure too: daemon threads still inside OpenSSL then died under it (SIGSEGV after the
error line; tests/test_tls_refused_exit.py). An object
left in a module's globals shows which exit the process took: its ``__del__`` runs
only in that teardown.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.origin import OriginServer

DRIVER = """\
import atexit, os, sys

class Marker:
    def __del__(self):
        os.write(2, b"TORN-DOWN\\n")

keep = Marker()
atexit.register(lambda: os.write(2, b"EXIT-HANDLER\\n"))
sys.argv[0] = "prefetch"
from prefetch.cli import run
run()
"""


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", DRIVER, *args], capture_output=True, text=True, timeout=120,
                          env=os.environ.copy(), stdin=subprocess.DEVNULL)


def test_a_successful_get_skips_the_teardown_but_not_the_exit_handlers(home, tmp_path):
    data = os.urandom(50_000)
    out = tmp_path / "d.bin"
    with OriginServer() as origin:
        origin.put("d.bin", data)
        proc = _run("get", origin.url_for("d.bin"), "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    assert proc.stdout.strip() == f"downloaded {out}"  # flushed before the process ended
    assert "EXIT-HANDLER" in proc.stderr
    assert "TORN-DOWN" not in proc.stderr


def test_a_failed_command_skips_the_teardown_and_keeps_its_code(home, tmp_path):
    proc = _run("get", "http://127.0.0.1:1/nothing", "-o", str(tmp_path / "x"), "-q", "--retries", "0",
                "--timeout", "2")
    assert proc.returncode == 3, proc.stderr  # (the network's code, as the usual exit gave it)
    assert proc.stderr.count("prefetch: error:") == 1
    assert "EXIT-HANDLER" in proc.stderr
    assert "TORN-DOWN" not in proc.stderr


def test_a_usage_error_keeps_its_code_and_line(home, tmp_path):
    proc = _run("get", "--no-such-flag", "http://127.0.0.1:1/x")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("prefetch: error:") == 1
    assert "EXIT-HANDLER" in proc.stderr
