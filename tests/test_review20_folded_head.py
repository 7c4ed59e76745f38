"""A hostile server's folded header lines cost the direct path no more than reading them (a real
``prefetch get`` subprocess, a raw server on 127.0.0.1).

``net/answer.Head`` puts a folded value (obs-fold) on one line since e0c25a2, as urllib3 2.8
does. Its pattern, ``[ \\t]*\\r\\n[ \\t]+``, was tried at every blank of a long run of blanks that
no line break ends, and went back over the whole run each time: quadratic in the run. A head of
folded lines of 64 KiB each (http.client's limit on a line; 100 lines at most) held the process,
the GIL with it, for many minutes of CPU, where urllib3 2.8 (whose pattern starts a run only at
its first blank) and 2.7 (which keeps the break) read it at once.

The subprocess runs under a CPU-time limit (``RLIMIT_CPU``): time the process itself spends,
however loaded the machine is. Reading this head takes well under a second of it; the
quadratic pattern needed far more than the limit (the process was killed by ``SIGXCPU``).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

from tests.keepalive import KeepAliveServer

RUN = 65_000  # blanks in a row, no line break after them: one line of the head each (< 64 KiB)
LINES = 90  # folded lines of the one header (http.client takes 100 header lines at most)
CPU_SECONDS = 60


def _hostile_answer() -> bytes:
    folded = b"X-Pad: a" + b" " * RUN + b"b\r\n" + b"".join(b" c" + b" " * RUN + b"d\r\n" for _ in range(LINES))
    return b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n" + folded + b"Connection: close\r\n\r\nhello"


def _cpu_limit() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS + 10))


def test_a_head_of_long_folded_lines_is_read_at_once_on_the_direct_path(home, tmp_path):
    server = KeepAliveServer([_hostile_answer()])
    try:
        out = tmp_path / "f.bin"
        env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
        got = subprocess.run([sys.executable, "-m", "prefetch", "get", f"{server.base}/f.bin", "-o", str(out), "-q"],
                             capture_output=True, text=True, timeout=1800, env=env, cwd=tmp_path,
                             stdin=subprocess.DEVNULL, preexec_fn=_cpu_limit)
    finally:
        server.close()
    assert got.returncode == 0, (got.returncode, got.stderr[-2000:])  # (-24: killed at the CPU limit)
    assert out.read_bytes() == b"hello"
