"""Processes of one user on one machine share each host's connection cap (engine/shared_budget.py).

Real ``prefetch get`` processes against a real nginx whose ``limit_rate`` keeps their downloads
overlapping; the connections serving at once are counted on the server's side, from nginx's
log of each request's connection, start and end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from prefetch.fs.slots import EXTRAS, WAITING, SlotFile, slot_file_name
from tests.helpers import start_cli
from tests.nginx import NginxServer, nginx_binary

MiB = 1 << 20
CAP = 4

pytestmark = pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    with NginxServer(root, limit_rate="512k") as nginx:
        yield nginx


def _put(server, name: str, size: int) -> bytes:
    data = os.urandom(size)
    (server.root / name).write_bytes(data)
    return data


def _get(server, name: str, out, *more: str) -> subprocess.Popen:
    env = dict(os.environ, PREFETCH_MIN_SPLIT=str(256 << 10))
    return start_cli("get", server.url_for(name), "-o", str(out), "--host-connections", str(CAP), "-q", *more,
                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen, timeout: float = 120) -> None:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 0, (out, err)


def _most_at_once(requests, name: str | None = None) -> int:
    """The most connections serving a request at once (of ``name``'s requests, or all)."""
    events = []
    for conn, _number, start, end, _status, _body, line in requests:
        if name is None or f"/{name} " in line:
            # (nginx's times are whole milliseconds: rounded back to them, float jitter of the
            # start, end - duration, never makes a request begin before the one it followed ended)
            events += [(round(start * 1000), 1, conn), (round(end * 1000), 0, conn)]
    busy: dict[int, int] = {}
    most = 0
    for _at, starts, conn in sorted(events):  # (an end and a start at the same millisecond: the end first)
        busy[conn] = busy.get(conn, 0) + (1 if starts else -1)
        if not busy[conn]:
            del busy[conn]
        most = max(most, len(busy))
    return most


def _slot_file(home) -> SlotFile:
    slots = home / ".prefetch" / "state" / "slots"
    slots.mkdir(parents=True, exist_ok=True)
    return slots


def _open_slots(directory, server) -> SlotFile:
    host = f"http://127.0.0.1:{server.port}"
    return SlotFile(os.open(directory / slot_file_name(host), os.O_RDWR | os.O_CREAT, 0o600))


def _held(slots: SlotFile) -> int:
    return sum(slots.marked(i) for i in range(CAP))  # (a write lock shows as well as a read lock)


def _gone(pid: int) -> bool:
    """The process has exited (a zombie has closed its descriptors already)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(") ", 1)[1][0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_processes_together_stay_within_one_hosts_cap(home, server, tmp_path):
    files = {name: _put(server, name, 8 * MiB) for name in ("a.bin", "b.bin", "c.bin")}
    procs = [_get(server, name, tmp_path / name) for name in files]
    for proc in procs:
        _finish(proc)
    for name, data in files.items():
        assert (tmp_path / name).read_bytes() == data
    served = server.requests()
    assert _most_at_once(served) <= CAP, sorted(served, key=lambda r: r[2])
    # They overlapped: the cap was shared, not taken in turns.
    starts = {name: min(r[2] for r in served if f"/{name} " in r[6]) for name in files}
    ends = {name: max(r[3] for r in served if f"/{name} " in r[6]) for name in files}
    assert max(starts.values()) < min(ends.values()), (starts, ends)


def test_a_single_process_gets_the_whole_cap(home, server, tmp_path):
    data = _put(server, "one.bin", 4 * MiB)
    _finish(_get(server, "one.bin", tmp_path / "one.bin"))
    assert (tmp_path / "one.bin").read_bytes() == data
    assert _most_at_once(server.requests()) == CAP


def test_a_killed_job_frees_its_slots(home, server, tmp_path):
    """A background job (``get -b``) holding every slot is SIGKILLed: its slots are free at once
    (the kernel drops a dead process's locks), and the next download gets the whole cap."""
    from tests.test_jobs import job_id_from, record

    _put(server, "big.bin", 40 * MiB)
    data = _put(server, "next.bin", 4 * MiB)
    slots = _open_slots(_slot_file(home), server)
    pid = None
    try:
        launch = _get(server, "big.bin", tmp_path / "big.bin", "-b")
        out, err = launch.communicate(timeout=60)
        assert launch.returncode == 0, (out, err)
        pid = record(job_id_from(out + err)).pid
        assert pid
        deadline = time.monotonic() + 60
        while _held(slots) < CAP:
            assert time.monotonic() < deadline, f"the job never held {CAP} slots"
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        # The kernel drops them with the process's descriptors, as its last thread exits: that
        # can be a moment after the process shows as a zombie (0.23 s seen: a thread still in
        # the kernel), so this waits for it (60 s at most), and for nothing else.
        deadline = time.monotonic() + 60
        while _held(slots):
            assert time.monotonic() < deadline, "a killed job's slots stayed held"
            time.sleep(0.02)
        assert _gone(pid)
        _finish(_get(server, "next.bin", tmp_path / "next.bin"))
    finally:
        slots.close()
        if pid and not _gone(pid):
            os.kill(pid, signal.SIGKILL)  # (the test failed before its kill: no worker left behind)
    assert (tmp_path / "next.bin").read_bytes() == data
    assert _most_at_once(server.requests(), "next.bin") == CAP


def test_a_process_waits_for_its_first_slot_and_still_answers_an_interrupt(home, server, tmp_path):
    """Another process holds every slot and extra connections (here: the test, which never makes
    room): a new one marks itself waiting, sends nothing, and stops at once on SIGINT; once the
    slots are free the next one downloads."""
    data = _put(server, "w.bin", 2 * MiB)
    holder = _open_slots(_slot_file(home), server)
    try:
        for index in range(CAP):
            assert holder.take(cap=CAP, skip=range(index)) == index
        holder.mark(EXTRAS, True)
        proc = _get(server, "w.bin", tmp_path / "w.bin")
        watcher = _open_slots(_slot_file(home), server)
        try:
            deadline = time.monotonic() + 60
            while not watcher.marked(WAITING):
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.02)
        finally:
            watcher.close()
        time.sleep(0.5)
        assert proc.poll() is None
        assert not server.requests()  # nothing sent while it waits
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=5)  # (the transfer's loop sees the stop every pass)
        assert proc.returncode == 7, (out, err)
    finally:
        holder.close()
    _finish(_get(server, "w.bin", tmp_path / "w.bin"))
    assert (tmp_path / "w.bin").read_bytes() == data


def test_a_process_gets_one_connection_when_every_slot_is_another_ones_only_one(home, server, tmp_path):
    """More processes than the cap: every slot held, none as an extra connection (here the test
    holds them all without the EXTRAS mark). A new process is not starved: it opens its one
    connection over the cap, and no more."""
    data = _put(server, "o.bin", 3 * MiB)
    holder = _open_slots(_slot_file(home), server)
    try:
        for index in range(CAP):
            assert holder.take(cap=CAP, skip=range(index)) == index
        _finish(_get(server, "o.bin", tmp_path / "o.bin"), timeout=60)
    finally:
        holder.close()
    assert (tmp_path / "o.bin").read_bytes() == data
    assert _most_at_once(server.requests()) == 1
