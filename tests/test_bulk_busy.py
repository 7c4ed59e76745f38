"""The bulk lane on a busy machine (a notebook that also trains): its rule against waiting on the
wire (``engine/bulk.py``'s ``IDLE``) counts what the wire did, not what the CPU did. Two busy
loops share one CPU with the prefetch process, and the lane stays on to the list's end; a
server whose answers really come late still turns it off after its first chunk."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from tests.bulk_origin import BulkOrigin
from tests.nginx import NginxServer
from tests.test_bulk import LANE_RANGE, _check, _files, _list

BUSY = r"""
import os, sys
os.sched_setaffinity(0, {int(sys.argv[1])})
while True:
    pass
"""


def test_the_lane_stays_on_while_other_work_holds_the_cpu(home, tmp_path, cli):
    """1,000 files of 16 KiB from nginx; the CLI and two busy loops pinned to one CPU. The lane's
    thread, answers already in its sockets, waited its turn for that CPU, and that wait counted
    as the wire's: the lane turned itself off after a chunk or two and the rest of the list went
    the usual way (one request a file, on threads waiting for the same CPU). Now every file of
    the list's second half still comes through the lane (its Range in nginx's log)."""
    files = _files(tmp_path / "www", 1000, 16 << 10)
    with NginxServer(tmp_path / "www") as server:  # (started first: not pinned)
        listing = _list(tmp_path / "urls.txt", server, files)
        out = tmp_path / "out"
        mine = os.sched_getaffinity(0)
        cpu = min(mine)
        loops = [subprocess.Popen([sys.executable, "-c", BUSY, str(cpu)]) for _ in range(2)]
        try:
            os.sched_setaffinity(0, {cpu})  # (the CLI, started now, inherits it)
            try:
                proc = cli("get", "-i", str(listing), "-P", str(out), "-q")
            finally:
                os.sched_setaffinity(0, mine)
        finally:
            for loop in loops:
                loop.kill()
                loop.wait()
        assert proc.returncode == 0, proc.stderr
        _check(out, files)
        served = server.served()
    assert len(served) == len(files), "one request per file"
    late = {f"f{i:04d}.bin" for i in range(len(files) // 2, len(files) - 1)}  # (a last file alone goes the usual way)
    usual = sorted(request.split()[1].lstrip("/") for _, _, _, asked, request in served
                   if asked != LANE_RANGE and request.split()[1].lstrip("/") in late)
    assert not usual, f"the lane was off for {len(usual)} of the list's last {len(late)} files: {usual[:5]}"


def test_a_server_whose_answers_come_late_still_turns_the_lane_off(home, tmp_path, cli):
    """Each answer 30 ms late on its connection (a near host, a slow server): the lane's thread
    sleeps in select, off the run queue, and its first chunk turns the lane off for the host;
    the rest of the list goes the usual way, many files side by side."""
    files = {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * 256 for i in range(300)}
    out = tmp_path / "out"
    with BulkOrigin(files, delay=0.03) as origin:
        listing = tmp_path / "urls.txt"
        listing.write_text("".join(f"{origin.url_for(name)}\n" for name in files))
        proc = cli("get", "-i", str(listing), "-P", str(out), "-q")
        assert proc.returncode == 0, proc.stderr
        lane = origin.lane()
    for name, data in files.items():
        assert (out / name).read_bytes() == data, name
    assert 0 < lane < 128, f"{lane} of {len(files)} files asked through the lane: it did not turn off"
