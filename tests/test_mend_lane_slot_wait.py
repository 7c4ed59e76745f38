"""The bulk lane waits for a connection slot while another download of the run holds every
one of its host's (a big slow file first in a list, ``PREFETCH_HOST_CONNECTIONS=2``): it
asked again at once, a chunk's locks and a writer thread each time: 0.75-2.86 CPU seconds in 3 s
of waiting where ``PREFETCH_BULK=0`` took 0.04. Real CLI process, real origin on 127.0.0.1;
its CPU read from /proc/PID/stat while it waits."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest

COUNT = 100


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_the_lane_sleeps_while_another_download_holds_every_slot(home, origin, tmp_path):
    origin.put("big.bin", random.Random(1).randbytes(16 << 20))
    names = [f"s{i:03d}.bin" for i in range(COUNT)]
    for name in names:
        origin.put(name, random.Random(name).randbytes(4096))
    origin.rate = 2_000_000  # (a connection: the big file takes ~4 s on its two)
    listing = tmp_path / "list.txt"
    listing.write_text("".join(origin.url_for(n) + "\n" for n in ["big.bin", *names]))
    env = {**os.environ, "PREFETCH_HOST_CONNECTIONS": "2", "PREFETCH_BULK": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "prefetch", "get", "-i", str(listing), "-P", str(tmp_path / "out"),
                             "-q"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        before, started = _cpu(proc.pid), time.monotonic()
        time.sleep(3.0)
        used, wall = _cpu(proc.pid) - before, time.monotonic() - started
        still = proc.poll() is None
        out = tmp_path / "out"
        placed_meanwhile = len(set(os.listdir(out)) & set(names)) if out.exists() else 0
    finally:
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert still, "the run ended before the window: nothing waited"
    assert placed_meanwhile <= 2, "the small files went on meanwhile: the slots were not all held"
    # (waiting costs next to nothing: 0.04-0.07 s measured; asking again at once took 0.75-2.86 s)
    assert used < 0.3 * wall / 3, f"{used:.2f} CPU seconds in {wall:.1f} s while the lane waited for a slot"
    for name in names:
        assert (tmp_path / "out" / name).read_bytes() == random.Random(name).randbytes(4096)
