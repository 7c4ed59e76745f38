"""A fast link: plain-HTTP bodies moved into the ``.part`` with ``splice`` (``prefetch/net/splice.py``),
and the ramp stepping down when connections stop paying. Correctness only (speed is
bench/run.py's job)."""

from __future__ import annotations

import os
import random
import threading
import time

import pytest

from prefetch.engine.options import TransferOptions
from prefetch.engine.ramp import Ramp
from prefetch.engine.transfer import download_to_part
from prefetch.net import splice
from prefetch.net.http import Timeouts
from tests.origin import CloseAfter, OriginServer, StallAfter

MIB = 1 << 20
NAME = "data.bin"

needs_splice = pytest.mark.skipif(splice.Pipe.open() is None, reason="no os.splice here (Linux only)")


def payload(size: int, seed: int = 11) -> bytes:
    return random.Random(seed).randbytes(size)


def fetch(tmp_path, url: str, **overrides):
    part = tmp_path / "out.bin.part"
    result = download_to_part(urls=[url], part=part, state_file=tmp_path / "out.bin.part.json",
                              algorithm="sha256", options=TransferOptions.from_env(**overrides))
    return result, part


@pytest.fixture
def spliced(monkeypatch):
    """Counts the bytes that went through splice (socket -> pipe)."""
    moved = []
    real = splice.splice_in

    def counting(sock, pipe, amount):
        n = real(sock, pipe, amount)
        moved.append(n)
        return n

    monkeypatch.setattr(splice, "splice_in", counting)
    return moved


@pytest.fixture
def origin():
    with OriginServer() as server:
        yield server


@needs_splice
def test_a_plain_http_body_moves_through_the_kernel(origin, tmp_path, spliced):
    data = payload(12 * MIB)
    origin.put(NAME, data)
    result, part = fetch(tmp_path, origin.url_for(NAME), connections=2)
    assert part.read_bytes() == data
    assert result.downloaded == len(data)
    # Each body's first read goes through Python (it empties http.client's buffer), the rest is spliced.
    assert sum(spliced) > len(data) // 2


@needs_splice
def test_splice_can_be_turned_off(origin, tmp_path, spliced):
    assert TransferOptions.from_env({"PREFETCH_SPLICE": "0"}).splice is False
    assert TransferOptions.from_env({}).splice is True
    data = payload(6 * MIB)
    origin.put(NAME, data)
    result, part = fetch(tmp_path, origin.url_for(NAME), connections=2, splice=False)
    assert part.read_bytes() == data
    assert spliced == []


@needs_splice
@pytest.mark.parametrize("reset", [False, True])
def test_a_connection_dropped_mid_splice_resumes_where_it_broke(origin, tmp_path, spliced, reset):
    data = payload(8 * MIB)
    origin.put(NAME, data)
    origin.add_fault(CloseAfter(3 * MIB + 123, path=NAME, reset=reset))
    result, part = fetch(tmp_path, origin.url_for(NAME), connections=1, backoff_base=0.01)
    assert part.read_bytes() == data
    assert result.downloaded == len(data)  # nothing fetched twice: the break was recorded exactly
    assert sum(spliced) > 0
    assert origin.pending_faults == []


@needs_splice
def test_a_stalled_spliced_body_times_out_and_resumes(origin, tmp_path, spliced):
    data = payload(6 * MIB)
    origin.put(NAME, data)
    origin.add_fault(StallAfter(2 * MIB, seconds=300.0, path=NAME))  # (the server would end it after 300 s)
    box = {}
    thread = threading.Thread(target=lambda: box.update(done=fetch(
        tmp_path, origin.url_for(NAME), connections=1, backoff_base=0.01, timeouts=Timeouts(connect=2.0, read=0.5))),
        daemon=True)
    thread.start()
    thread.join(120)  # (a hang guard: only the 0.5 s read timeout can end the stall before 300 s)
    assert not thread.is_alive(), "the read timeout did not end the stalled spliced body"
    result, part = box["done"]
    assert part.read_bytes() == data
    assert result.downloaded == len(data)
    assert sum(spliced) > 0


@needs_splice
def test_the_pipe_between_socket_and_file_moves_exact_bytes(tmp_path):
    """``splice_out`` writes what ``splice_in`` took, at the offset asked; a pipe left holding
    bytes is replaced by ``clean``."""
    import socket

    a, b = socket.socketpair()
    a.settimeout(1.0)
    b.settimeout(1.0)
    pipe = splice.Pipe.open()
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        b.sendall(b"x" * 1000)
        n = splice.splice_in(a, pipe, 4096)
        assert n == 1000 and pipe.pending == 1000
        splice.splice_out(pipe, fd, n, 10)
        assert pipe.pending == 0 and pipe.clean() is pipe
        assert os.pread(fd, 2000, 0) == b"\0" * 10 + b"x" * 1000
        with pytest.raises(socket.timeout):
            splice.splice_in(a, pipe, 4096)  # nothing arrives within the socket's timeout
        b.sendall(b"y" * 10)
        splice.splice_in(a, pipe, 4096)
        fresh = pipe.clean()
        assert fresh is not pipe and fresh.pending == 0
        fresh.close()
        b.close()
        assert splice.splice_in(a, fresh := splice.Pipe.open(), 4096) == 0  # EOF
        fresh.close()
    finally:
        os.close(fd)
        a.close()


# -- the ramp steps down ------------------------------------------------------


def drive(ramp: Ramp, rate_of, *, steps: int = 60, interval: float = 0.1, cpu_load: float | None = None,
          bursts: bool = False) -> list[int]:
    """Run ``ramp`` with every connection answered at once; ``rate_of(count)`` is the link's rate.

    ``cpu_load``: the process's CPU seconds per second (None: not reported). ``bursts``: the
    bytes come as a per-second throttle sends them: a second's worth in its first fifth,
    then nothing until the next second.
    """
    now, downloaded, counts = 0.0, 0, []
    target = ramp.target
    for _ in range(steps):
        cpu = None if cpu_load is None else now * cpu_load
        target = ramp.update(now, downloaded, alive=target, answered=target, latency=0.001, route="short",
                             cpu=cpu)
        counts.append(target)
        now += interval / 2
        share = 1.0 if not bursts else (5.0 if round(now % 1.0, 6) < 0.2 else 0.0)
        downloaded += int(rate_of(target) * share * interval / 2)
    return counts


def test_the_ramp_steps_down_when_more_connections_bring_nothing():
    """A CPU-bound link (loopback, a LAN): the rate is the same at any count and the process
    is busy on the CPU, so after the first doubling shows no gain the ramp halves down to two."""
    ramp = Ramp(TransferOptions(initial_connections=8, max_connections=32))
    counts = drive(ramp, lambda n: 500e6, cpu_load=1.0)
    assert 16 in counts and 32 not in counts
    assert ramp.done and counts[-1] == 2


def test_the_ramp_steps_down_on_a_full_link_only_after_a_long_look():
    """The same flat rate with an idle CPU (a full link, or a throttle's gap): no count is
    given up within the first second of a step; then the ramp still halves down to two."""
    ramp = Ramp(TransferOptions(initial_connections=8, max_connections=32))
    counts = drive(ramp, lambda n: 500e6, steps=200)
    first_drop = next(i for i, n in enumerate(counts) if n < 8)
    assert first_drop * 0.05 >= 2.0  # 16 judged, then 8, each over a full second
    assert ramp.done and counts[-1] == 2


def test_a_bursty_per_connection_throttle_climbs_to_the_cap():
    """nginx's limit_rate and CDN token buckets send per whole second: a tenth of a second
    brings five times the rate or nothing. Every connection is worth 10 MB/s; a ramp that
    believed a tenth of a second's "no gain" stepped down to 2-4 connections here."""
    ramp = Ramp(TransferOptions(initial_connections=8, max_connections=32))
    counts = drive(ramp, lambda n: 10e6 * n, bursts=True, cpu_load=0.4, steps=120)
    assert min(counts) == 8
    assert ramp.done and counts[-1] >= 16


def test_the_ramp_goes_back_up_when_fewer_connections_cost_rate():
    """Each connection is worth 10 MB/s up to 8 of them (the link's rate beyond): 16 brings
    nothing, 4 costs half, so the ramp settles at 8."""
    ramp = Ramp(TransferOptions(initial_connections=8, max_connections=32))
    counts = drive(ramp, lambda n: 10e6 * min(n, 8))
    assert 4 in counts
    assert ramp.done and counts[-1] == 8


def test_the_ramp_still_climbs_while_connections_pay():
    ramp = Ramp(TransferOptions(initial_connections=2, max_connections=16))
    counts = drive(ramp, lambda n: 10e6 * n)
    assert ramp.done and counts[-1] == 16 and min(counts) == 2


def test_a_watched_fast_probe_starts_the_climb_from_one_connection_and_may_end_there():
    """A polite job's ramp (one_connection_rate): the probe's connection alone brings 500 MB/s
    on a CPU-bound link, so the ramp starts from one, not eight; two bring nothing more,
    so it settles at one."""
    ramp = Ramp(TransferOptions(initial_connections=8, max_connections=32, one_connection_rate=200e6))
    counts = drive(ramp, lambda n: 500e6, cpu_load=1.0)
    assert max(counts) <= 2 and counts[0] == 1
    assert ramp.done and counts[-1] == 1


def test_a_watched_slow_probe_climbs_from_initial_connections_as_before():
    """A per-connection throttle (10 MB/s each) is no fast single connection: after the watch
    the ramp opens its initial eight and climbs to the cap as without the watch."""
    ramp = Ramp(TransferOptions(initial_connections=8, max_connections=32, one_connection_rate=200e6))
    counts = drive(ramp, lambda n: 10e6 * n, cpu_load=0.4, steps=120)
    assert counts[0] == 1 and 8 in counts
    assert ramp.done and counts[-1] == 32


def watched_on_a_long_route(wait_per_second: float) -> list[int]:
    """A polite ramp whose first answer came late (a "long" route) and whose two threads, over
    the watch, each waited ``wait_per_second`` for a CPU and ran 0.02 s a second (schedstat's
    numbers, as ``fs.processes.cpu_and_wait`` reads them); the link brings 20 MB/s."""
    ramp = Ramp(TransferOptions(initial_connections=8, max_connections=32, long_route_connections=12,
                                one_connection_rate=200e6))
    counts = []
    for step in range(20):
        now = step * 0.05
        sched = {tid: (0.02 * now, wait_per_second * now) for tid in (101, 102)}
        counts.append(ramp.update(now, int(20e6 * now), alive=counts[-1] if counts else 1, answered=1,
                                  latency=0.2, route="long", cpu=0.04 * now, sched=sched))
    return counts


def test_a_watched_probe_that_waited_for_the_cpu_stays_at_one_connection_on_any_route():
    """A polite job beside a training loop: its threads spent the watch waiting for the CPU,
    not for the network (its answers late for it, the route looked long): one connection, no
    long-route jump; the same numbers with the threads asleep (a real long route) jump."""
    assert set(watched_on_a_long_route(0.6)) == {1}
    assert watched_on_a_long_route(0.01)[-1] == 12


def test_without_one_connection_rate_the_ramp_opens_its_initial_count_at_once():
    ramp = Ramp(TransferOptions(initial_connections=8, max_connections=32))
    assert drive(ramp, lambda n: 500e6, cpu_load=1.0, steps=1) == [8]


def test_a_first_answer_two_round_trips_of_a_long_route_late_is_a_long_route_at_once():
    """A new connection's first answer takes two round trips (handshake, request): on a route
    of the threshold's round trip or more the jump comes with the first answer; loopback's
    answers in a millisecond stay short."""
    from prefetch.engine.schedule import RouteJudge

    assert RouteJudge(0.04).add(0.1) == "long"  # rtt50: 2 x 50 ms
    judge = RouteJudge(0.04)
    assert judge.add(0.05) == "long?"
    assert judge.add(0.001) == "long?" and judge.add(0.001) == "short"
    assert RouteJudge(0.04).add(0.002) == "short"


def test_the_first_answers_latency_leaves_out_the_clients_own_set_up(origin, tmp_path):
    """A first request that spends 0.3 s before it goes out (importing requests, opening its
    session on a loaded machine) is no long route: the long-route jump stays off."""
    from prefetch.net.http import Client

    class SlowStart(Client):
        def _open(self, direct):  # the direct pools or the requests session, whichever the request takes
            if (self._direct if direct else self._session) is None:
                time.sleep(0.3)
            return super()._open(direct)

    data = payload(4 * MIB)
    origin.put(NAME, data)
    origin.rate = 2 * MIB
    part = tmp_path / "out.bin.part"
    result = download_to_part(urls=[origin.url_for(NAME)], part=part, state_file=tmp_path / "s.json",
                              client_factory=SlowStart,
                              options=TransferOptions(ramp_gain=100.0, max_connections=12, initial_connections=4,
                                                      long_route_connections=12))
    assert part.read_bytes() == data
    assert result.connections < 12  # stepped (4, then 8), not the long-route jump to 12
