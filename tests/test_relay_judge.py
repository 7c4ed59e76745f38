"""The route judge on a machine whose CPUs are contended (issue 19's rtt200 row beside a
training loop): a relay one hop away (its kernel round trip loopback's, every answer the far
route's time) is not a near host, so a list through it goes the usual way, many files in
flight, not through the bulk lane's two connections; a near host under the same load is near
and its files take the lane. The judgement is asserted (which lane took the files), not seconds."""

from __future__ import annotations

import pytest

from prefetch.fs.processes import CpuContention, _loaded, cpu_stall_seconds
from tests.latency_proxy import LatencyProxy
from tests.nginx import NginxServer
from tests.test_bulk import LANE_RANGE, _check, _files
from tests.test_inline_first import niced_busy_loops


@pytest.fixture
def loaded_cpus():
    yield from niced_busy_loops()


def _contended_since(contention: CpuContention) -> bool:
    """The CPUs were contended over the span ``contention`` looks at (without PSI: the load average)."""
    return contention.lately() if cpu_stall_seconds() is not None else _loaded()


def _get_list(cli, tmp_path, base: str, files: dict[str, bytes]):
    listing = tmp_path / "urls.txt"
    listing.write_text("".join(f"{base}/{name}\n" for name in files))
    proc = cli("get", "-i", str(listing), "-P", str(tmp_path / "out"), "-q")
    assert proc.returncode == 0, proc.stderr
    _check(tmp_path / "out", files)


def test_a_list_through_a_relay_goes_the_usual_way_while_the_cpus_are_contended(home, tmp_path, cli, loaded_cpus):
    """100 files through a relay 100 ms away (the suite's latency proxy in front of nginx) while
    busy loops contend for every CPU: the kernel's round trip is loopback's, every answer the
    route's, and the requesting thread waited for a CPU for a sliver of it: the host is not
    near, and no file goes through the bulk lane. (Before, contended CPUs made any short kernel
    round trip near: the lane took the files not yet started when the first answer came, two
    connections for a far route's files.)"""
    files = _files(tmp_path / "www", 100, 16 << 10)
    contention = CpuContention()
    with NginxServer(tmp_path / "www") as server, LatencyProxy(server.port, rtt=0.1) as relay:
        _get_list(cli, tmp_path, relay.url, files)
        lane = [r for r in server.served() if r[3] == LANE_RANGE]
    assert _contended_since(contention), "the busy loops contended for the CPUs throughout"
    assert lane == [], f"{len(lane)} of {len(files)} files went through the bulk lane: the relay was judged near"


def test_a_list_from_a_near_host_takes_the_lane_while_the_cpus_are_contended(home, tmp_path, cli, loaded_cpus):
    """The same list from nginx itself, under the same busy loops: the host is near and the lane
    takes files."""
    files = _files(tmp_path / "www", 100, 16 << 10)
    contention = CpuContention()
    with NginxServer(tmp_path / "www") as server:
        _get_list(cli, tmp_path, server.url.rstrip("/"), files)
        lane = [r for r in server.served() if r[3] == LANE_RANGE]
    assert _contended_since(contention), "the busy loops contended for the CPUs throughout"
    assert len(lane) >= 2, f"only {len(lane)} of {len(files)} files came through the lane: the host was not near"


def test_the_judge_weighs_a_late_answer_by_its_threads_wait_for_a_cpu():
    """A late answer on a short kernel round trip, the CPUs contended: the machine's when what is
    left of it (the thread's own wait already out) is within ``SLACK`` times that wait of the
    mark, else the route's; the host is near while the machine's outnumber the route's; a wait
    not measured weighs nothing; a free machine's late answers are the route's whatever the wait."""
    from prefetch.engine.hosts import SharedRouteJudge

    relay = SharedRouteJudge(0.04, contended=lambda: True)
    relay.add(0.4, 0.00002, 0.002)  # a new connection through a relay 200 ms away: 2 ms of it a CPU's
    assert not relay.near and relay.kernel_rtt is None and relay.late == [0, 1]
    relay.add(0.2, 0.00002, 0.05)  # one odd answer whose thread waited long ...
    assert relay.late == [1, 1] and not relay.near  # ... does not outweigh the route's
    loaded = SharedRouteJudge(0.04, contended=lambda: True)
    loaded.add(0.09, 0.00002, 0.08)  # a near server that waited for a CPU as long as this thread did
    assert loaded.near and loaded.kernel_rtt == 0.00002 and loaded.late == [1, 0]
    unmeasured = SharedRouteJudge(0.04, contended=lambda: True)
    unmeasured.add(0.09, 0.00002, None)
    assert not unmeasured.near and unmeasured.late == [0, 0]
    free = SharedRouteJudge(0.04, contended=lambda: False)
    free.add(0.09, 0.00002, 0.08)
    assert not free.near and free.late == [0, 1]


def test_a_relay_is_not_near_while_the_cpus_are_contended_in_process(origin, tmp_path, loaded_cpus):
    """The engine's own view of a relay 100 ms away under the busy loops: its answers are weighed
    and found the route's (``late``), and the host is not near."""
    from prefetch.engine.hosts import Hosts
    from prefetch.engine.options import TransferOptions
    from prefetch.engine.transfer import download_to_part
    from prefetch.net.http import Timeouts

    data = bytes(range(256)) * 64
    for i in range(3):
        origin.put(f"r{i}.bin", data)
    contention = CpuContention()
    with LatencyProxy(origin.port, rtt=0.1) as relay:
        hosts = Hosts(long_route=0.04)
        for i in range(3):
            download_to_part(urls=[f"{relay.url}/r{i}.bin"], part=tmp_path / f"r{i}.part",
                             state_file=tmp_path / f"r{i}.json", algorithm="sha256",
                             options=TransferOptions(hosts=hosts, timeouts=Timeouts(connect=5, read=5)))
            assert (tmp_path / f"r{i}.part").read_bytes() == data
        (host,) = hosts.all()
        hosts.close()
    assert _contended_since(contention), "the busy loops contended for the CPUs throughout"
    assert host.route.fastest >= 0.1, "every answer took the relay's round trip"
    assert host.route.late[1] >= 1 and host.route.late[0] < host.route.late[1], host.route.late
    assert not host.route.near, "the relay's late answers are the route's, contended CPUs or not"
