"""A small file's one request runs on the file's own thread (issue 19): no worker thread,
while a big file's probe still hands over to worker threads and a stop still ends a
request that waits on the network."""

from __future__ import annotations

import hashlib
import random
import threading
import time

from prefetch.engine.hosts import Hosts
from prefetch.engine.options import TransferOptions
from prefetch.engine.transfer import download_to_part
from prefetch.errors import InterruptedTransferError
from prefetch.net.http import Timeouts
import pytest

from tests.origin_faults import Delay, StallAfter

KiB = 1 << 10
MiB = 1 << 20


def _started_threads(monkeypatch) -> list[str]:
    """Names of the threads this process starts from now on (the shared deadline watchdog and
    the test origin's own threads aside)."""
    names: list[str] = []
    real_start = threading.Thread.start

    def start(self):
        if self.name != "prefetch-deadlines" and "process_request" not in self.name:
            names.append(self.name)
        return real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    return names


def _get(origin, name, tmp_path, *, hosts=None, stop=None, **options):
    options.setdefault("timeouts", Timeouts(connect=3, read=3))
    opts = TransferOptions(hosts=hosts, **options)
    return download_to_part(urls=[origin.url_for(name)], part=tmp_path / f"{name}.part",
                            state_file=tmp_path / f"{name}.part.json", algorithm="sha256", options=opts, stop=stop)


def test_small_files_start_no_thread_and_reuse_one_connection(origin, tmp_path, monkeypatch):
    files = {f"s{i}.bin": random.Random(i).randbytes(16 * KiB) for i in range(5)}
    for name, data in files.items():
        origin.put(name, data)
    hosts = Hosts()
    started = _started_threads(monkeypatch)
    for i, (name, data) in enumerate(files.items()):
        result = _get(origin, name, tmp_path, hosts=hosts)
        assert (tmp_path / f"{name}.part").read_bytes() == data
        assert result.digest == hashlib.sha256(data).hexdigest()
        assert result.connections == 1
        if i == 0:
            assert started  # the first file to a host not heard from yet takes a worker thread ...
            started.clear()
            (host,) = hosts.all()
            # (and may open connections ahead while its first answer is awaited, which a loaded
            # machine can delay past the long-route mark: engine/preconnect.py)
            opened = host.opened
    hosts.close()
    assert started == []  # ... then no worker thread, no saver thread: each file ran on this thread
    assert host.opened == opened, "the other four opened no client (no connection): they took a kept-alive one"


def test_a_big_file_hands_its_probe_answer_to_worker_threads(origin, tmp_path, monkeypatch):
    data = random.Random(7).randbytes(6 * MiB)
    origin.put("big.bin", data)
    origin.rate = 2 * MiB  # (a response's pace: the probe alone cannot read it all before workers join, on any load)
    started = _started_threads(monkeypatch)
    result = _get(origin, "big.bin", tmp_path, connections=4, min_split=256 * KiB)
    assert (tmp_path / "big.bin.part").read_bytes() == data
    assert result.digest == hashlib.sha256(data).hexdigest()
    assert len(started) >= 2  # the probe's answer went on in a worker, and more joined it
    assert result.connections >= 2


@pytest.mark.parametrize("fault", [StallAfter(n=1000, seconds=300.0, path="stall.bin"),
                                   Delay(seconds=300.0, path="stall.bin")],
                         ids=["body", "head"])
def test_a_stop_ends_an_inline_request_waiting_on_the_network(origin, tmp_path, fault):
    data = random.Random(8).randbytes(64 * KiB)
    origin.put("stall.bin", data)
    origin.put("warm.bin", data)
    hosts = Hosts()
    _get(origin, "warm.bin", tmp_path, hosts=hosts)  # the host has answered: the next file runs inline
    origin.add_fault(fault)
    error = _stopped(lambda stop: _get(origin, "stall.bin", tmp_path, hosts=hosts, stop=stop,
                                       timeouts=Timeouts(connect=3, read=600)))
    assert isinstance(error, InterruptedTransferError)  # (the stall ends 300 s on, the read timeout 600 s on)


def _stopped(download) -> BaseException | None:
    """Run ``download(stop)`` on a thread, set ``stop`` half a second in: what it raised. The
    download's timeouts (and a blocked connect's 127 s of SYN retries) are past the thread's
    90 s join (a hang guard), so only the stop ends it in time."""
    stop = threading.Event()
    box = {}

    def run():
        try:
            download(stop)
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.5)
    stop.set()
    thread.join(90)
    assert not thread.is_alive(), "the stop did not end the download"
    return box.get("error")


def test_a_stop_while_the_first_connection_is_still_being_made_returns_at_once(tmp_path):
    """A host that never answers the handshake (a route blocked abroad drops the SYN; here a
    listening socket whose accept queue is full): the first file to it does not run inline,
    so a stop returns within a second, not after the 8 s connect timeout."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    filler = socket.create_connection(server.getsockname(), timeout=2)  # fills the accept queue
    url = f"http://127.0.0.1:{server.getsockname()[1]}/blocked.bin"
    options = TransferOptions(hosts=Hosts(), timeouts=Timeouts(connect=600, read=600))
    try:
        error = _stopped(lambda stop: download_to_part(
            urls=[url], part=tmp_path / "blocked.bin.part", state_file=tmp_path / "b.json", options=options,
            stop=stop))
        assert isinstance(error, InterruptedTransferError)
    finally:
        filler.close()
        server.close()


def test_files_are_pulled_in_order_within_the_limit_and_a_stop_reports_the_rest():
    """run_in_order without before_start: threads take the next file themselves, in index
    order, never more than limit() at once; a thread that finds no room ends (none polls);
    after a stop the files not started still run (and report themselves interrupted)."""
    from prefetch.engine.many import run_in_order

    lock = threading.Lock()
    started: list[int] = []
    running = [0, 0]  # now, most
    stop = threading.Event()

    def run_one(i: int) -> None:
        with lock:
            started.append(i)
            running[0] += 1
            running[1] = max(running[1], running[0])
        if not stop.is_set():
            time.sleep(0.002)
        if i == 150:
            stop.set()
        with lock:
            running[0] -= 1

    run_in_order(200, run_one, workers=8, stop=stop, limit=lambda busy: 3)
    assert sorted(started) == list(range(200))  # each file once (after the stop too)
    assert running[1] <= 3
    assert not [t for t in threading.enumerate() if t.name.startswith("prefetch-file")]


def test_a_stop_ends_a_connect_to_a_host_that_answered_and_then_drops_handshakes(tmp_path):
    """The host answered once (so its next file runs inline on the file's thread), then stops
    accepting (its accept queue is full: a handshake dropped, as on a route that broke): a stop
    during the next file's connect returns at once, not after the 8 s connect timeout."""
    import socket

    data = random.Random(9).randbytes(16 * KiB)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    base = f"http://127.0.0.1:{server.getsockname()[1]}"

    def answer_once() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(data) + data)

    threading.Thread(target=answer_once, daemon=True).start()
    hosts = Hosts()
    options = TransferOptions(hosts=hosts, timeouts=Timeouts(connect=600, read=600))
    download_to_part(urls=[f"{base}/warm.bin"], part=tmp_path / "warm.part", state_file=tmp_path / "w.json",
                     options=options)
    assert (tmp_path / "warm.part").read_bytes() == data
    filler = socket.create_connection(server.getsockname(), timeout=2)  # the accept queue is full now
    try:
        error = _stopped(lambda stop: download_to_part(
            urls=[f"{base}/next.bin"], part=tmp_path / "next.part", state_file=tmp_path / "n.json",
            options=options, stop=stop))
        assert isinstance(error, InterruptedTransferError)
    finally:
        filler.close()
        server.close()


@pytest.fixture
def loaded_cpus():
    yield from niced_busy_loops()


def niced_busy_loops():
    """The machine's CPUs contended for real: one niced busy loop more than twice the CPUs this
    process may use (PSI counts their wait; nice 19 leaves this test's threads first in line)."""
    import os
    import subprocess
    import sys

    hogs = [subprocess.Popen([sys.executable, "-c", "import os\nos.nice(19)\nwhile 1: pass"])
            for _ in range(2 * len(os.sched_getaffinity(0)) + 1)]
    try:
        time.sleep(0.3)
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def test_a_host_whose_answers_a_loaded_machine_made_late_is_near(origin, tmp_path, monkeypatch):
    """A loaded machine's scheduling makes every loopback answer late: here the download's
    threads run on one CPU at nice 19 behind a busy loop there (a `get -b` job beside a training
    loop: each wake-up waits for the loop's turn to end), so its first answer comes past the 40 ms
    mark of a long route. The time was the requesting thread's own wait for the CPU: the route
    judge leaves it out, the host is near, and the next small file runs inline on the file's own
    thread (as the bulk lane takes a list's files) instead of the usual way. (A server held 80 ms
    by a sleep stood in for the load here before: that is the route's time, as a relay's is, and
    no longer makes a host near.)"""
    import os
    import subprocess
    import sys

    from prefetch.engine import fetcher, schedule, single

    answers = []

    def timed(latency, clock):
        answers.append(latency)  # (the request's wall time, before the judge leaves the wait out)
        return schedule.wire_time(latency, clock)

    monkeypatch.setattr(fetcher, "wire_time", timed)
    monkeypatch.setattr(single, "wire_time", timed)
    cpu = min(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\n"
                            "print('on', flush=True)\nwhile 1: pass", str(cpu)], stdout=subprocess.PIPE, text=True)
    files = {f"late{i}.bin": random.Random(20 + i).randbytes(16 * KiB) for i in range(2)}
    for name, data in files.items():
        origin.put(name, data)
    first, last = files
    got = {}

    def behind_the_busy_loop() -> None:
        os.sched_setaffinity(0, {cpu})  # (this thread, and the threads it starts: the download's)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        hosts = Hosts(long_route=0.04)
        _get(origin, first, tmp_path, hosts=hosts)
        (host,) = hosts.all()
        got["answers"], got["near"] = list(answers), host.route.near
        started.clear()
        got["result"] = _get(origin, last, tmp_path, hosts=hosts)
        got["started"] = list(started)
        hosts.close()

    started = _started_threads(monkeypatch)
    try:
        assert hog.stdout.readline().strip() == "on"
        thread = threading.Thread(target=behind_the_busy_loop)
        thread.start()
        thread.join(120)
        assert not thread.is_alive()
    finally:
        hog.kill()
        hog.wait(timeout=30)
    assert got["answers"] and min(got["answers"]) >= 0.04, f"every answer came late: {got}"
    assert got["near"], f"the host is near: its answers were late for want of the CPU, not for the route: {got}"
    assert (tmp_path / f"{last}.part").read_bytes() == files[last]
    assert got["result"].digest == hashlib.sha256(files[last]).hexdigest()
    assert got["started"] == [], "the last file ran inline: no worker thread"


def test_late_answers_while_the_cpus_were_free_are_the_routes_not_near(origin, tmp_path, monkeypatch):
    """A relay or tunnel one hop away (an ``ssh -L`` port, a CDN edge fetching from far away): the
    kernel's round trip is the next hop's, well under the mark, but every answer takes the far
    route's time. With the CPUs free that time is the route's, so the host is not near: its small
    files do not go one at a time inline (the bulk lane, two connections) but the usual way, many
    in flight. (The twentieth sitting's regression: 200 x 64 KiB through a 200 ms relay took
    5.2 s against 1.9 s.) The machine's contention is the one thing given here: the CI machine's
    own load would otherwise decide."""
    from prefetch.engine import near as near_module, single
    from tests.latency_proxy import LatencyProxy

    class Free:
        def lately(self) -> bool:
            return False

    monkeypatch.setattr(near_module, "CpuContention", Free)
    inline = []
    real_try_single = single.try_single
    monkeypatch.setattr(single, "try_single", lambda **kw: inline.append(kw["url"]) or real_try_single(**kw))
    files = {f"far{i}.bin": random.Random(40 + i).randbytes(16 * KiB) for i in range(2)}
    for name, data in files.items():
        origin.put(name, data)
    with LatencyProxy(origin.port, rtt=0.1) as relay:
        hosts = Hosts(long_route=0.04)
        first = next(iter(files))
        options = dict(hosts=hosts, timeouts=Timeouts(connect=3, read=3))
        for name in files:
            opts = TransferOptions(**options)
            result = download_to_part(urls=[f"{relay.url}/{name}"], part=tmp_path / f"{name}.part",
                                      state_file=tmp_path / f"{name}.part.json", algorithm="sha256", options=opts)
            assert (tmp_path / f"{name}.part").read_bytes() == files[name]
            assert result.digest == hashlib.sha256(files[name]).hexdigest()
            if name == first:
                (host,) = hosts.all()
                assert host.route.fastest >= 0.1, "every answer took the relay's round trip"
                assert not host.route.near, "a free machine's late answers are the route's"
        hosts.close()
        assert inline == [], "no file went inline (one at a time on a warm connection): the usual way"


def test_the_judge_takes_the_kernels_round_trip_only_when_the_cpus_were_contended():
    from prefetch.engine.hosts import SharedRouteJudge

    free = SharedRouteJudge(0.04, contended=lambda: False)
    free.add(0.2, 0.00002, 0.2)
    assert not free.near and free.kernel_rtt is None
    busy = SharedRouteJudge(0.04, contended=lambda: True)
    busy.add(0.2, 0.00002, 0.2)  # (its thread waited for a CPU as long: tests/test_relay_judge.py weighs that)
    assert busy.near and busy.kernel_rtt == 0.00002
    quick = SharedRouteJudge(0.04, contended=lambda: False)
    quick.add(0.001, 0.00002)  # (a quick answer is near whatever the CPUs did)
    assert quick.near


def test_the_judge_looks_at_the_cpus_only_when_an_answer_could_make_the_host_near():
    """Each look is a read of /proc/pressure/cpu: a loaded machine's 2,000 late loopback answers
    made 2,000 of them, where the first contended one already made the host near for good; nor
    does a round trip of a long route (that could never make it near) need one."""
    from prefetch.engine.hosts import SharedRouteJudge

    looks = []

    def contended() -> bool:
        looks.append(1)
        return True

    judge = SharedRouteJudge(0.04, contended=contended)
    judge.add(0.3, 0.2, 0.0)  # (a long route's own round trip)
    judge.add(0.3, 0.00002, 0.0)  # (a late answer its thread's wait does not explain: the route's)
    assert looks == [] and not judge.near
    for _ in range(2000):
        judge.add(0.2, 0.00002, 0.2)  # (late, and its thread waited as long for a CPU)
    assert judge.near and judge.kernel_rtt == 0.00002
    assert 1 <= len(looks) <= 200, len(looks)  # (at most one look a quarter second, not 2,000)


def test_cpu_contention_reads_the_kernels_pressure_under_busy_loops(loaded_cpus):
    """The real kernel's pressure stall information while busy loops contend for every CPU: the
    machine counts as contended (where the kernel keeps none, the load average's verdict)."""
    from prefetch.fs.processes import CpuContention, _loaded, cpu_stall_seconds

    contention = CpuContention()
    time.sleep(0.5)
    if cpu_stall_seconds() is None:
        assert contention.lately() == _loaded()
    else:
        assert contention.lately(), "busy loops for every CPU and more: contended"


def test_the_kernels_round_trip_is_the_answering_connections_and_none_through_a_proxy(origin, monkeypatch):
    """``Response.round_trip`` reads the connection that answered (loopback: well under the 40 ms
    mark); through a proxy the connection's round trip is the proxy's, not the host's: None (the
    answer's time judges the route there)."""
    from prefetch.net.http import Client, open_url

    origin.put("rt.bin", b"x" * 1000)
    with Client() as client:
        resp, _ = open_url(client, origin.url_for("rt.bin"))
        try:
            rtt = resp.round_trip()
            assert rtt is not None and 0 < rtt < 0.04, rtt
            monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
            monkeypatch.delenv("no_proxy", raising=False)
            monkeypatch.delenv("NO_PROXY", raising=False)
            assert resp.round_trip() is None
        finally:
            resp.close()
