"""A ``get -b`` job SIGKILLed while it holds a host's slots (engine/shared_budget.py): a job for
the same host that was already waiting for its first connection goes on at once, not after
anything the dead job would have done. Real processes against a real nginx."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from prefetch.fs.slots import EXTRAS, WAITING, SlotFile, slot_file_name
from tests.helpers import start_cli
from tests.nginx import NginxServer, nginx_binary
from tests.test_jobs import job_id_from, record

MiB = 1 << 20
CAP = 4

pytestmark = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")


def _wait_for(check, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_waiting_job_goes_on_when_the_frozen_holder_is_killed(home, tmp_path):
    """Job A holds every slot and extra connections, then is frozen (SIGSTOP: it can make no
    room). Job B waits for its first connection. A is SIGKILLed: B downloads its file."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "big.bin").write_bytes(os.urandom(40 * MiB))
    data = os.urandom(1 * MiB)
    (root / "next.bin").write_bytes(data)
    # Job A at normal priority: a polite (nice 19) job whose threads wait for a busy CPU stays
    # at one connection by design (engine/ramp.py), and so never held the slots this is about
    # (a CI run at load 8-16: "job A never held 4 slots").
    env = dict(os.environ, PREFETCH_MIN_SPLIT=str(256 << 10), PREFETCH_NICE="0")
    with NginxServer(root, limit_rate="512k") as server:
        slots_dir = home / ".prefetch" / "state" / "slots"
        slots_dir.mkdir(parents=True)
        slots = SlotFile(os.open(slots_dir / slot_file_name(f"http://127.0.0.1:{server.port}"),
                                 os.O_RDWR | os.O_CREAT, 0o600))
        pid = b = None
        try:
            launch = start_cli("get", server.url_for("big.bin"), "-o", str(tmp_path / "big.bin"), "-b",
                               "--host-connections", str(CAP), env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            pid = record(job_id_from(launch.communicate(timeout=60)[0])).pid
            _wait_for(lambda: all(slots.marked(i) for i in range(CAP)) and slots.marked(EXTRAS),
                      f"job A never held {CAP} slots")
            os.kill(pid, signal.SIGSTOP)
            b = start_cli("get", server.url_for("next.bin"), "-o", str(tmp_path / "next.bin"), "-q",
                          "--host-connections", str(CAP), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
            _wait_for(lambda: slots.marked(WAITING), "job B never waited for its first connection")
            time.sleep(1)
            assert b.poll() is None  # (A, frozen, makes no room: B waits)
            os.kill(pid, signal.SIGKILL)
            out, err = b.communicate(timeout=60)
            assert b.returncode == 0, (out, err)
        finally:
            slots.close()
            if b is not None and b.poll() is None:
                b.kill()
                b.communicate()
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    assert (tmp_path / "next.bin").read_bytes() == data
