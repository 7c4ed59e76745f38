"""A process's idle connections to a host it is done with do not keep another process waiting.

Real ``prefetch get`` processes against two real nginx servers (engine/shared_budget.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
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


def test_a_job_waiting_for_its_first_slot_shows_waiting_in_status(home, tmp_path):
    """Other processes hold every slot of the host and extra connections (here the test, which
    never makes room): a ``get -b`` job waits for its first connection and `prefetch status`
    says "waiting" (it said "pending", as for a job not started yet); once the slots are free it
    downloads."""
    from prefetch.fs.slots import EXTRAS, SlotFile, slot_file_name
    from tests.test_jobs import job_id_from

    (tmp_path / "root").mkdir()
    data = os.urandom(1 * MiB)
    (tmp_path / "root" / "w.bin").write_bytes(data)
    with NginxServer(tmp_path / "root") as server:
        slots = home / ".prefetch" / "state" / "slots"
        slots.mkdir(parents=True)
        holder = SlotFile(os.open(slots / slot_file_name(f"http://127.0.0.1:{server.port}"),
                                  os.O_RDWR | os.O_CREAT, 0o600))
        try:
            for index in range(CAP):
                assert holder.take(cap=CAP, skip=range(index)) == index
            holder.mark(EXTRAS, True)
            launch = start_cli("get", server.url_for("w.bin"), "-o", str(tmp_path / "w.bin"), "--host-connections",
                               str(CAP), "-b", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            job = job_id_from(launch.communicate(timeout=60)[0])
            deadline = time.monotonic() + 60
            while True:
                shown = subprocess.run([sys.executable, "-m", "prefetch", "--plain", "status", job],
                                       capture_output=True, text=True).stdout
                row = [line for line in shown.splitlines() if line.startswith(job)]
                if row and " waiting " in row[0]:
                    break
                assert time.monotonic() < deadline, shown
                time.sleep(0.2)
            assert not server.requests()  # (nothing sent while it waits)
        finally:
            holder.close()
        done = subprocess.run([sys.executable, "-m", "prefetch", "wait", job], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, (done.stdout, done.stderr)
    assert (tmp_path / "w.bin").read_bytes() == data


def test_a_job_busy_after_its_download_makes_room_for_another_process(home, tmp_path):
    """Job A downloaded x.bin from X on several connections and is now busy with something
    else (here the jobs' test hook pauses it at the file's ``done``, as extracting or hashing
    would keep it; no transfer loop runs): job B's get from X must not wait for A's run to end."""
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "x.bin").write_bytes(os.urandom(8 * MiB))
    (tmp_path / "x" / "z.bin").write_bytes(z_data := os.urandom(256 << 10))
    env = dict(os.environ, PREFETCH_MIN_SPLIT=str(256 << 10), PREFETCH_TEST_PAUSE_AT="done",
               PREFETCH_TEST_PAUSE_SECONDS="120")
    from tests.test_jobs import job_id_from, record

    with NginxServer(tmp_path / "x", limit_rate="512k") as x:
        launch = start_cli("get", x.url_for("x.bin"), "-o", str(tmp_path / "x.bin"), "--host-connections", str(CAP),
                           "-b", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        job = job_id_from(launch.communicate(timeout=60)[0])
        pid = record(job).pid
        b = None
        try:
            log = home / ".prefetch" / "state" / "jobs" / f"{job}.log"
            deadline = time.monotonic() + 60
            while "test hook: pausing" not in (log.read_text() if log.exists() else ""):
                assert time.monotonic() < deadline, log.read_text() if log.exists() else "no log"
                time.sleep(0.05)
            from prefetch.fs.slots import SlotFile, slot_file_name

            slots = home / ".prefetch" / "state" / "slots" / slot_file_name(f"http://127.0.0.1:{x.port}")
            watcher = SlotFile(os.open(slots, os.O_RDWR))
            try:
                assert sum(watcher.marked(i) for i in range(CAP)) >= 2  # (its warm connections' slots)
            finally:
                watcher.close()
            b = start_cli("get", x.url_for("z.bin"), "-o", str(tmp_path / "z.bin"), "--host-connections",
                          str(CAP), "-q", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = b.communicate(timeout=60)  # (it waited the pause's 120 s)
            assert b.returncode == 0, (out, err)
            assert os.path.exists(f"/proc/{pid}")  # (A is still paused)
        finally:
            if b is not None and b.poll() is None:
                b.kill()
                b.communicate()
            os.kill(pid, 9)
    assert (tmp_path / "z.bin").read_bytes() == z_data
