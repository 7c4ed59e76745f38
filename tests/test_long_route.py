"""Long routes: a latency proxy (tests/latency_proxy.py) in front of the local origin.

A first answer slower than ``long_route`` means a long route: the connections open
together (no step-by-step ramp, whose every step would cost round trips to judge) and
requests go in pieces of ``piece_size``, so a connection moves on to the next piece
and the tail never waits for a slow connection's half of the file. Correctness only:
connection counts, request sizes, byte-identical files (speed is bench/run.py's job).
"""

from __future__ import annotations

import hashlib
import random
import re

import pytest

from prefetch.net.http import Timeouts
from prefetch.engine.options import TransferOptions
from prefetch.engine.transfer import download_to_part
from tests.latency_proxy import LatencyProxy
from tests.origin import CloseAfter, OriginServer, WrongContentRange

KiB, MiB = 1 << 10, 1 << 20
NAME = "far.bin"
DATA = random.Random(77).randbytes(4 * MiB + 12345)
_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


@pytest.fixture
def far():
    """The origin, 60 ms of round trip away, throttled per connection."""
    with OriginServer() as origin:
        origin.put(NAME, DATA)
        origin.rate = 2 * MiB
        with LatencyProxy(origin.port, rtt=0.06) as proxy:
            yield origin, proxy


def options(**overrides) -> TransferOptions:
    values = dict(max_connections=12, initial_connections=4, piece_size=256 * KiB, min_split=64 * KiB,
                  long_route=0.025, backoff_base=0.01, backoff_cap=0.05, timeouts=Timeouts(connect=5, read=5))
    values.update(overrides)
    return TransferOptions(**values)


def download(tmp_path, url, opts):
    part = tmp_path / "far.bin.part"
    result = download_to_part(urls=[url], part=part, state_file=tmp_path / "far.bin.part.json",
                              algorithm="sha256", options=opts)
    return result, part


def spans(origin) -> list[tuple[int, int | None]]:
    out = []
    for record in origin.data_requests(NAME):
        match = _RANGE.fullmatch((record.range or "").strip())
        if match:
            out.append((int(match.group(1)), int(match.group(2)) if match.group(2) else None))
    return out


def test_a_long_route_opens_its_connections_together_and_asks_in_pieces(far, tmp_path):
    origin, proxy = far
    # ramp_gain 100: no step of the stepwise ramp could ever pass, so reaching
    # max_connections shows the long-route jump, not the ramp.
    result, part = download(tmp_path, proxy.url_for(NAME), options(ramp_gain=100.0))
    assert part.read_bytes() == DATA
    assert result.digest == hashlib.sha256(DATA).hexdigest()
    assert result.connections == 12
    requested = spans(origin)
    # The probe (size and Range support) asks for a closed first range, not `bytes=0-` (issue 20).
    assert requested[0] == (0, (1 << 20) - 1)
    # Every later request is one piece at most (or a split of one).
    assert all(end is not None and end - start + 1 <= 256 * KiB + 128 * KiB for start, end in requested[1:])
    assert result.downloaded == len(DATA)  # no byte fetched twice


def test_a_short_route_keeps_the_stepwise_ramp(tmp_path):
    """The same transfer on loopback (first answer far below long_route): no jump, no pieces."""
    with OriginServer() as origin:
        origin.put(NAME, DATA)
        origin.rate = 2 * MiB
        result, part = download(tmp_path, origin.url_for(NAME), options(ramp_gain=100.0, long_route=5.0))
    assert part.read_bytes() == DATA
    assert result.connections < 12  # the ramp steps (4, then 8) and no step pays 100x
    assert any(end is None or end - start + 1 > 384 * KiB for start, end in spans(origin)[1:])


def test_pieces_survive_a_connection_that_dies_and_one_that_answers_wrongly(far, tmp_path):
    origin, proxy = far
    origin.add_fault(CloseAfter(100_000, path=NAME, only_ranged=True))  # the probe dies mid-body
    origin.add_fault(WrongContentRange(shift=7, path=NAME, only_ranged=True))
    origin.add_fault(CloseAfter(10_000, path=NAME, only_ranged=True, reset=True))
    result, part = download(tmp_path, proxy.url_for(NAME), options())
    assert part.read_bytes() == DATA
    assert result.digest == hashlib.sha256(DATA).hexdigest()
    assert result.downloaded == len(DATA)  # the broken pieces resumed where they broke
    assert origin.pending_faults == []
