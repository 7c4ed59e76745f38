"""On a terminal `prefetch get` draws a progress bar; on a size-less pty it falls back to lines."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios


def run_on_pty(args: list[str], *, cols: int) -> str:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, cols, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "prefetch", *args],
        stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the pty
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=60) == 0
    return b"".join(chunks).decode("utf-8", "replace")


def test_terminal_gets_a_bar(home, origin, tmp_path):
    origin.put("big.bin", os.urandom(3 << 20))
    origin.rate = 4 << 20
    out = run_on_pty(["get", origin.url_for("big.bin"), "-o", str(tmp_path / "big.bin")], cols=100)
    assert "100%|" in out and "big.bin:" in out  # tqdm's bar, finished
    assert out.count("100%|") == 1  # the final bar is left once, not redrawn
    assert (tmp_path / "big.bin").stat().st_size == 3 << 20


def test_sizeless_pty_gets_plain_lines(home, origin, tmp_path):
    origin.put("f.bin", os.urandom(1 << 20))
    out = run_on_pty(["get", origin.url_for("f.bin"), "-o", str(tmp_path / "f.bin")], cols=0)
    assert "%|" not in out
    assert " f.bin done " in out
