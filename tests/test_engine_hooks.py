"""The engine's hooks for other features: extra request headers, a rate limiter, a prompt stop.

``TransferOptions.headers`` go on every request and nowhere else (not the state file,
not the events); ``TransferOptions.limiter.wait(n)`` hears of every byte read; a set
``stop`` ends the transfer even while a connection waits for a server that does not
answer, and even while one is blocked reading a stalled body.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from prefetch.errors import InterruptedTransferError
from prefetch.net.http import Timeouts
from prefetch.engine.options import TransferOptions
from prefetch.engine.transfer import download_to_part
from tests.origin import Delay, OriginServer, StallAfter

MiB = 1 << 20
DATA = random.Random(12).randbytes(3 * MiB)
SECRET = "Bearer s3cret-token"


@pytest.fixture
def origin():
    with OriginServer() as server:
        server.put("f.bin", DATA)
        yield server


def run(tmp_path, url, **options):
    events = []
    part, state = tmp_path / "f.bin.part", tmp_path / "f.bin.part.json"
    result = download_to_part(urls=[url], part=part, state_file=state, algorithm="sha256",
                              options=TransferOptions(**options), on_event=events.append)
    return result, events, part, state


def test_extra_headers_go_on_every_request_and_never_into_the_state_or_the_events(origin, tmp_path):
    origin.rate = 2 * MiB  # several connections really run
    headers = {"Authorization": SECRET, "X-Team": "vision"}
    result, events, part, state = run(tmp_path, origin.url_for("f.bin"), headers=headers, connections=4,
                                      min_split=256 << 10)
    assert part.read_bytes() == DATA
    requests = origin.data_requests("f.bin")
    assert len(requests) >= 2
    assert all(r.headers.get("Authorization") == SECRET and r.headers.get("X-Team") == "vision" for r in requests)
    assert "s3cret" not in state.read_text()
    assert not any("s3cret" in (e.message or "") for e in events)
    assert "s3cret" not in repr(TransferOptions(headers=headers))


class CountingLimiter:
    """Counts what the engine books (before each read) less what it gives back; never blocks."""

    chunk = 64 << 10  # the most one read may book

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.total = 0
        self.calls = 0

    def wait(self, n: int) -> None:
        assert 0 < n <= self.chunk
        with self.lock:
            self.total += n
            self.calls += 1

    def refund(self, n: int) -> None:
        with self.lock:
            self.total -= n


def test_the_limiter_hears_of_every_byte_read(origin, tmp_path):
    origin.rate = 4 * MiB
    limiter = CountingLimiter()
    result, _, part, _ = run(tmp_path, origin.url_for("f.bin"), limiter=limiter, connections=3,
                             min_split=256 << 10)
    assert part.read_bytes() == DATA
    assert limiter.total == result.downloaded == len(DATA)
    assert limiter.calls > 3


@pytest.mark.parametrize("fault", ["no answer", "stalled body"])
def test_a_stop_ends_the_transfer_while_a_server_does_not_answer(origin, tmp_path, fault):
    """Timeouts of a minute, a server silent for 60 s: a stop must not wait for either."""
    if fault == "no answer":
        origin.add_fault(Delay(seconds=60))
    else:
        origin.add_fault(StallAfter(n=1000, seconds=60))
    stop = threading.Event()
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            download_to_part(urls=[origin.url_for("f.bin")], part=tmp_path / "f.bin.part",
                             state_file=tmp_path / "f.bin.part.json", stop=stop,
                             options=TransferOptions(timeouts=Timeouts(connect=60, read=60)))
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - checked below
            outcome.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not origin.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert origin.requests
    time.sleep(0.2)  # the request is in flight, the server sits on it
    stop.set()
    thread.join(30)  # far less than the server's 60 s: the stop did not wait for it
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], InterruptedTransferError)
