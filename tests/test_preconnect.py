"""Connections opened ahead while the probe's answer crosses a long route (engine/preconnect.py).

A latency proxy (tests/latency_proxy.py) 300 ms in front of the local origin: the probe's
answer comes two round trips after it is sent, and the connections the transfer will want
are opened meanwhile, then carry its range requests. Counted on the proxy: when each
connection was accepted against the first answer, how many there were at once, and how
many closed without a request. Ordering and counts only (speed is bench/run.py's job).
"""

from __future__ import annotations

import hashlib
import random
import socket
import threading
import time

import pytest

from prefetch.engine.hosts import Hosts
from prefetch.engine.options import TransferOptions
from prefetch.engine.transfer import download_to_part
from prefetch.errors import InterruptedTransferError
from prefetch.net.http import Timeouts
from tests.latency_proxy import LatencyProxy
from tests.origin import OriginServer

KiB, MiB = 1 << 10, 1 << 20
BIG = random.Random(20).randbytes(4 * MiB + 4321)
SMALL = random.Random(21).randbytes(200 * KiB)


@pytest.fixture
def far():
    with OriginServer() as origin:
        origin.put("big.bin", BIG)
        origin.put("small.bin", SMALL)
        origin.rate = 2 * MiB
        with LatencyProxy(origin.port, rtt=0.3) as proxy:
            yield origin, proxy


def options(**overrides) -> TransferOptions:
    values = dict(max_connections=6, long_route_connections=6, piece_size=256 * KiB, min_split=64 * KiB,
                  long_route=0.025, timeouts=Timeouts(connect=5, read=5))
    values.update(overrides)
    return TransferOptions(**values)


def get(tmp_path, proxy, name, opts, **kwargs):
    part = tmp_path / f"{name}.part"
    result = download_to_part(urls=[proxy.url_for(name)], part=part, state_file=tmp_path / f"{name}.part.json",
                              algorithm="sha256", options=opts, **kwargs)
    return result, part.read_bytes()


def before_first_answer(proxy) -> int:
    """Connections accepted before the first byte of an answer reached the client."""
    return sum(1 for t in proxy.accepted if t < proxy.first_answer)


def settled(check, seconds: float = 5.0) -> bool:
    """Wait until ``check()`` holds (the proxy sees closes a moment after the client makes them)."""
    until = time.monotonic() + seconds
    while not check():
        if time.monotonic() > until:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.parametrize("fixed", [None, 4], ids=["ramp", "connections-4"])
def test_connections_open_during_the_probe_and_carry_the_ranges(far, tmp_path, fixed):
    _, proxy = far
    count = fixed or 6  # --connections N, else the long-route count
    result, data = get(tmp_path, proxy, "big.bin", options(connections=fixed))
    assert data == BIG and result.digest == hashlib.sha256(BIG).hexdigest()
    assert result.connections == count
    assert before_first_answer(proxy) == count  # the probe's and the others opened while it waited ...
    assert proxy.connections == count  # ... which the ranges then went over: no connection beyond them
    assert settled(lambda: proxy.open == 0)
    assert proxy.silent == 0  # every one of them carried requests
    assert result.downloaded == len(BIG)


def test_an_answer_slower_than_a_long_route_opens_the_ramps_first_count_ahead(far, tmp_path):
    """The probe's answer comes after 0.6 s (two round trips of 0.3 s): slower than ``long_route``
    (0.4 s), not twice as slow. After any answer that slow the ramp opens its first count
    (``initial_connections``, 3 here) together, so those are opened at 0.4 s, while the answer is
    still on its way (a mirror 30 ms away answers in ~60 ms; the rest opened after its answer
    started a round trip later); the long route's count waits for 0.8 s, which never comes."""
    _, proxy = far
    result, data = get(tmp_path, proxy, "big.bin", options(long_route=0.4, initial_connections=3))
    assert data == BIG and result.digest == hashlib.sha256(BIG).hexdigest()
    assert before_first_answer(proxy) == 3  # the probe's and the ramp's two more, opened while it waited
    assert settled(lambda: proxy.open == 0)
    assert proxy.silent == 0  # each carried requests


def test_connections_opened_ahead_count_in_the_hosts_budget(far, tmp_path):
    _, proxy = far
    hosts = Hosts(budget=4, long_route=0.025)
    try:
        result, data = get(tmp_path, proxy, "big.bin", options(hosts=hosts))
        (host,) = hosts.all()
        assert data == BIG
        assert before_first_answer(proxy) == 4  # the budget's four, not the six a long route asks for
        assert proxy.peak <= 4 and host.peak <= 4
        assert result.connections <= 4
    finally:
        hosts.close()


def test_a_size_hint_of_a_small_file_opens_nothing_ahead(far, tmp_path):
    _, proxy = far
    result, data = get(tmp_path, proxy, "small.bin", options(), size_hint=len(SMALL))
    assert data == SMALL
    assert proxy.connections == 1


def test_connections_a_small_file_did_not_need_serve_the_next_file(far, tmp_path):
    """No size hint: the small file's probe waits long enough to open five ahead; its answer
    needs none of them: they go to the host's warm clients and the next file uses them."""
    _, proxy = far
    hosts = Hosts(long_route=0.025)
    try:
        _, data = get(tmp_path, proxy, "small.bin", options(hosts=hosts))
        assert data == SMALL
        assert before_first_answer(proxy) == 6
        _, data = get(tmp_path, proxy, "big.bin", options(hosts=hosts))
        assert data == BIG
        assert proxy.connections == 6  # the big file opened none of its own
    finally:
        hosts.close()
    assert settled(lambda: proxy.open == 0)
    assert proxy.silent == 0


def test_connections_not_needed_are_closed_without_a_host(far, tmp_path):
    _, proxy = far
    _, data = get(tmp_path, proxy, "small.bin", options())
    assert data == SMALL
    assert before_first_answer(proxy) == 6
    assert settled(lambda: proxy.open == 0)  # closed once the answer showed they were not needed
    assert proxy.silent == 5


def test_connections_opened_to_a_host_that_redirects_elsewhere_are_closed_at_its_answer(far, tmp_path):
    """The probe's answer comes from another host (a redirect, as to a CDN): the connections
    opened ahead to the first one are closed then, not held idle for the whole download."""
    origin, proxy = far
    with LatencyProxy(origin.port, rtt=0.3) as cdn:
        origin.set_redirect("moved.bin", cdn.url_for("big.bin"))
        open_mid_download = []

        def on_event(event):
            if event.total and event.done >= event.total // 2 and not open_mid_download:
                open_mid_download.append(proxy.open)

        _, data = get(tmp_path, proxy, "moved.bin", options(), on_event=on_event)
    assert data == BIG
    assert before_first_answer(proxy) == 6  # opened while the redirect was on its way
    assert open_mid_download == [1]  # closed at the answer: half the file later only the probe's own is open
    assert proxy.silent == 5


def test_a_stop_while_connections_are_still_being_opened_returns_at_once(tmp_path):
    """A host that takes the probe and then drops every handshake (its accept queue full): the
    connections opened ahead hang in connect; a stop returns at once, their connects are cut
    short (their slots in the host's budget come back long before the connect timeout), and
    the probe's slot comes back when its read gives up."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    held = []
    threading.Thread(target=lambda: held.append(server.accept()[0]), daemon=True).start()  # the probe, never answered
    url = f"http://127.0.0.1:{server.getsockname()[1]}/blocked.bin"
    hosts = Hosts(budget=6, long_route=0.025)
    stop = threading.Event()
    box = {}

    def run():
        try:
            download_to_part(urls=[url], part=tmp_path / "blocked.bin.part", state_file=tmp_path / "b.json",
                             options=options(hosts=hosts, timeouts=Timeouts(connect=600, read=20)), stop=stop)
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert settled(lambda: hosts.all() and hosts.all()[0].leased == 6)  # the probe and five opening
        (host,) = hosts.all()
        stop.set()
        thread.join(90)  # (a hang guard: the connects' timeout is 600 s, their SYN retries 127 s)
        assert isinstance(box.get("error"), InterruptedTransferError)
        assert host.leased >= 1, "the stop returned before the probe's read (20 s) gave up"
        assert settled(lambda: host.leased <= 1, 60.0)  # the connects were cut short (127 s of SYN retries)
        assert settled(lambda: host.leased == 0, 90.0)  # and the probe's read gave up
    finally:
        for sock in held:
            sock.close()
        server.close()
        hosts.close()
