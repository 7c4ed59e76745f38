"""Stopping the bulk lane mid-batch: kill -9 then the same command, --fail-fast at a 404, and
Ctrl-C. Nothing at a final name is incomplete or wrong; the lane's unplaced bodies leave no
``.part``; the exit codes are the usual ones. The origin answers each request a few ms late, so
the list takes a while and the stop lands inside a batch; every run proves the lane took part
(requests pipelined on the origin's connections)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

from tests.bulk_origin import BulkOrigin
from tests.helpers import start_cli

COUNT = 400


def _files() -> dict[str, bytes]:
    return {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * 256 for i in range(COUNT)}


def _listing(path, origin: BulkOrigin, files) -> str:
    path.write_text("".join(f"{origin.url_for(n)} sha256={hashlib.sha256(d).hexdigest()}\n" for n, d in files.items()))
    return str(path)


def _placed(out, files) -> int:
    """Files at their final names, each complete and correct (asserted)."""
    placed = 0
    for path in out.iterdir() if out.exists() else []:
        if path.name in files:
            assert path.read_bytes() == files[path.name], f"{path.name}: an incomplete or wrong file at a final name"
            placed += 1
    return placed


def _wait_for(out, files, count: int, proc) -> None:
    deadline = time.monotonic() + 60
    while _placed(out, files) < count and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)


def test_kill_9_mid_batch_then_the_same_command_finishes(home, tmp_path, cli):
    files = _files()
    out = tmp_path / "out"
    with BulkOrigin(files, delay=0.004) as origin:
        listing = _listing(tmp_path / "urls.txt", origin, files)
        proc = start_cli("get", "-i", listing, "-P", str(out), "-q", stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        _wait_for(out, files, 60, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert origin.pipelined() > 10, "the lane was pipelining when killed"
        assert _placed(out, files) < COUNT, "killed before the end"
        before = {name for name in files if (out / name).exists()}
        asked = len(origin.log)
        origin.delay = 0
        again = cli("get", "-i", listing, "-P", str(out), "-q")
        resent = [path.lstrip("/") for _, path, _, _ in origin.log[asked:]]
    assert again.returncode == 0, again.stderr
    assert _placed(out, files) == COUNT
    assert sorted(p.name for p in out.iterdir()) == sorted(files)
    assert not before & set(resent), "a placed file is not fetched again"
    assert len(resent) == len(set(resent)) == COUNT - len(before), "each unplaced file is asked once more"


HOLDER = r"""
import sys, time
from prefetch.fs.beside_locks import beside_lock
with beside_lock(sys.argv[1], timeout=0):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_lock_file_a_killed_run_left_beside_a_file_goes_when_the_next_run_places_it(home, tmp_path, cli):
    """A run killed (-9) while its usual path held a file's beside lock leaves the lock file (its
    flock goes with the process). The next run's lane took that file, placed it and left
    ``f010.bin.part.lock`` beside it for good (the test above met it under load, the killed run's
    usual path holding a file then); a lock file there now sends the file the usual way, which
    takes the lock and removes it."""
    files = _files()
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out / "f010.bin")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
    finally:
        holder.kill()
        holder.wait()
    assert (out / "f010.bin.part.lock").exists()  # (what kill -9 leaves)
    with BulkOrigin(files) as origin:
        listing = _listing(tmp_path / "urls.txt", origin, files)
        again = cli("get", "-i", listing, "-P", str(out), "-q")
        assert origin.pipelined() > 10, "the lane took the list"
    assert again.returncode == 0, again.stderr
    assert _placed(out, files) == COUNT
    assert sorted(p.name for p in out.iterdir()) == sorted(files)


def test_fail_fast_at_a_404_inside_a_batch_stops_the_list(home, tmp_path):
    files = _files()
    out = tmp_path / "out"
    with BulkOrigin(files, {"f100.bin": "404"}, delay=0.002) as origin:
        listing = _listing(tmp_path / "urls.txt", origin, files)
        proc = start_cli("get", "-i", listing, "-P", str(out), "--fail-fast", "-q", stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
        _, err = proc.communicate(timeout=60)
        assert origin.pipelined() > 10, "the lane took the batch"
    assert proc.returncode == 3, err
    assert "f100.bin" in err and "404" in err
    assert 0 < _placed(out, files) < COUNT - 1, "stopped before the end"
    assert not [p for p in out.iterdir() if p.name.endswith(".part")], "no .part left"


def test_ctrl_c_mid_batch_stops_and_leaves_no_part(home, tmp_path):
    files = _files()
    out = tmp_path / "out"
    with BulkOrigin(files, delay=0.005) as origin:
        listing = _listing(tmp_path / "urls.txt", origin, files)
        proc = start_cli("get", "-i", listing, "-P", str(out), "-q", stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env={**os.environ, "PREFETCH_BULK": "1"})
        _wait_for(out, files, 40, proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert origin.pipelined() > 10, "the lane was pipelining"
    assert proc.returncode == 7, err
    assert _placed(out, files) < COUNT, "stopped before the end"
    assert not [p for p in out.iterdir() if p.name.endswith(".part")], "the lane's unplaced bodies were removed"


def test_a_server_that_answers_slowly_gets_the_usual_path_after_a_chunk(home, tmp_path, cli):
    """Answers 4 ms apart on each connection: the lane's chunk mostly waits on the wire, so after
    it (at most ``CHUNK_SECONDS`` of asking) the rest of the list takes the usual path, whose
    files in flight overlap the server's pace; every file arrives."""
    files = _files()
    out = tmp_path / "out"
    with BulkOrigin(files, delay=0.004) as origin:
        listing = _listing(tmp_path / "urls.txt", origin, files)
        proc = cli("get", "-i", listing, "-P", str(out), "-q")
        lane = origin.lane()
        usual = len(origin.log) - lane
    assert proc.returncode == 0, proc.stderr
    assert _placed(out, files) == COUNT
    assert lane > 10, "the lane ran first"
    assert usual > COUNT // 4, f"{lane} files through the lane, {usual} the usual way"
