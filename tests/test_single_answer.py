"""A small file from a near host in one answer, without the transfer (engine/single.py), and
the transfer taking over from where that stopped: a bigger answer or one without a length
is read on (never asked for again), a failed request or a broken body is the transfer's own
failure to retry, and a stop still ends it within a second."""

from __future__ import annotations

import hashlib
import random
import threading
import time

import pytest

from prefetch.engine import transfer as transfer_module
from prefetch.engine.hosts import Hosts
from prefetch.engine.options import TransferOptions
from prefetch.engine.transfer import download_to_part
from prefetch.errors import InterruptedTransferError
from prefetch.model.events import EventKind
from prefetch.net.http import Timeouts
from tests.keepalive import KeepAliveServer
from tests.origin import OriginServer
from tests.origin_faults import CloseAfter, Delay, Redirect, Status

KiB = 1 << 10


@pytest.fixture
def origin():
    with OriginServer() as server:
        yield server


@pytest.fixture
def transfers(monkeypatch) -> list[str]:
    """The files a transfer (``_Transfer.run``) ran for; a file done in one answer runs none."""
    names: list[str] = []
    real = transfer_module._Transfer.run

    def run(self):
        names.append(self.name)
        return real(self)

    monkeypatch.setattr(transfer_module._Transfer, "run", run)
    return names


def _get(url, name, tmp_path, hosts, *, stop=None, events=None, read=3.0):
    opts = TransferOptions(hosts=hosts, timeouts=Timeouts(connect=3, read=read), backoff_base=0.05)
    return download_to_part(urls=[url], part=tmp_path / f"{name}.part", state_file=tmp_path / f"{name}.part.json",
                            algorithm="sha256", options=opts, stop=stop, name=name,
                            on_event=events.append if events is not None else (lambda e: None))


def _put(origin, name, size, seed):
    data = random.Random(seed).randbytes(size)
    origin.put(name, data)
    return data


def _warm(origin, tmp_path, hosts):
    """One file first: the host has answered (quickly: loopback), so the next files may go in one answer."""
    _put(origin, "warm.bin", 4 * KiB, 0)
    _get(origin.url_for("warm.bin"), "warm.bin", tmp_path, hosts)


def _from_zero(origin, name) -> int:
    return len([r for r in origin.data_requests(name) if (r.range or "bytes=0-").startswith("bytes=0-")])


def test_small_files_from_a_near_host_need_no_transfer(origin, tmp_path, transfers):
    hosts = Hosts()
    _warm(origin, tmp_path, hosts)
    for i in range(5):
        data = _put(origin, f"s{i}.bin", 40 * KiB + i, i + 1)
        events = []
        result = _get(origin.url_for(f"s{i}.bin"), f"s{i}.bin", tmp_path, hosts, events=events)
        assert result.digest == hashlib.sha256(data).hexdigest() and result.size == len(data)
        assert (tmp_path / f"s{i}.bin.part").read_bytes() == data
        assert len(origin.data_requests(f"s{i}.bin")) == 1
        assert [e.kind for e in events].count(EventKind.START) == 1
    assert transfers == ["warm.bin"]
    assert len({r.client for r in origin.requests}) == 1  # one kept-alive connection throughout
    host = hosts.all()[0]
    assert host.leased == 0 and host.transfers == 0  # slots and shares given back


@pytest.mark.parametrize("size", [300 * KiB, 3 << 20], ids=["above-inline", "above-first-window"])
def test_a_bigger_answer_is_read_on_by_the_transfer_without_asking_again(origin, tmp_path, transfers, size):
    hosts = Hosts()
    _warm(origin, tmp_path, hosts)
    data = _put(origin, "big.bin", size, 7)
    result = _get(origin.url_for("big.bin"), "big.bin", tmp_path, hosts)
    assert result.digest == hashlib.sha256(data).hexdigest()
    assert transfers == ["warm.bin", "big.bin"]
    assert _from_zero(origin, "big.bin") == 1  # the first answer was read on, not asked for again


def _chunked(body: bytes) -> bytes:
    """A 200 answer with ``body`` chunked (no length, no range)."""
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 5000]), body[i:i + 5000]) for i in range(0, len(body), 5000))
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nETag: \"c1\"\r\n\r\n" + chunks + b"0\r\n\r\n"


def test_an_answer_without_a_length_is_read_on_by_the_transfer(tmp_path, transfers):
    data = random.Random(3).randbytes(20 * KiB)
    server = KeepAliveServer([_chunked(data)])
    try:
        hosts = Hosts()
        _get(f"{server.base}/warm.bin", "warm.bin", tmp_path, hosts)
        result = _get(f"{server.base}/c.bin", "c.bin", tmp_path, hosts)
    finally:
        server.close()
    assert result.digest == hashlib.sha256(data).hexdigest()
    assert transfers == ["warm.bin", "c.bin"]
    assert server.served == 2  # one per file: the one-answer attempt's answer was read on


def test_a_503_on_the_one_answer_is_the_transfer_s_failure_to_retry(origin, tmp_path):
    hosts = Hosts()
    _warm(origin, tmp_path, hosts)
    data = _put(origin, "busy.bin", 30 * KiB, 4)
    origin.add_fault(Status(503, retry_after=0, path="busy.bin"))
    events = []
    result = _get(origin.url_for("busy.bin"), "busy.bin", tmp_path, hosts, events=events)
    assert result.digest == hashlib.sha256(data).hexdigest()
    assert [r.status for r in origin.data_requests("busy.bin")] == [503, 206]
    notes = [e.message for e in events if e.kind is EventKind.NOTE]
    assert any("HTTP 503" in n and "retry 1/" in n for n in notes), notes  # counted by the transfer's retries
    assert hosts.all()[0].refusals == 1


def test_a_body_that_breaks_is_retried_by_the_transfer(origin, tmp_path):
    hosts = Hosts()
    _warm(origin, tmp_path, hosts)
    data = _put(origin, "cut.bin", 50 * KiB, 5)
    origin.add_fault(CloseAfter(n=10 * KiB, path="cut.bin"))
    events = []
    result = _get(origin.url_for("cut.bin"), "cut.bin", tmp_path, hosts, events=events)
    assert result.digest == hashlib.sha256(data).hexdigest()
    assert (tmp_path / "cut.bin.part").read_bytes() == data
    assert len(origin.data_requests("cut.bin")) == 2
    assert any("retry 1/" in (e.message or "") for e in events if e.kind is EventKind.NOTE)


def test_a_stop_while_the_one_answer_is_awaited_ends_within_a_second(origin, tmp_path, transfers):
    hosts = Hosts()
    _warm(origin, tmp_path, hosts)
    _put(origin, "slow.bin", 30 * KiB, 6)
    origin.add_fault(Delay(seconds=300.0, path="slow.bin"))  # (the answer, 300 s on, and the read timeout, 600 s)
    stop = threading.Event()
    box = {}

    def run():
        try:
            _get(origin.url_for("slow.bin"), "slow.bin", tmp_path, hosts, stop=stop, read=600.0)
        except BaseException as exc:  # noqa: BLE001
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(0.5)
    assert transfers == ["warm.bin"]  # the request in flight is the one-answer attempt's
    stop.set()
    thread.join(90)  # (a hang guard: only the stop ends it before 300 s)
    assert not thread.is_alive(), "the stop did not end the request in flight"
    assert isinstance(box.get("error"), InterruptedTransferError)
    host = hosts.all()[0]
    assert host.leased == 0 and host.transfers == 0


def test_a_redirected_small_file_comes_in_one_answer_and_is_served_by_its_url(origin, tmp_path, transfers):
    hosts = Hosts()
    _warm(origin, tmp_path, hosts)
    data = _put(origin, "real.bin", 20 * KiB, 9)
    origin.add_fault(Redirect(origin.url_for("real.bin"), path="alias.bin"))
    result = _get(origin.url_for("alias.bin"), "alias.bin", tmp_path, hosts)
    assert result.digest == hashlib.sha256(data).hexdigest()
    assert result.served == {origin.url_for("alias.bin"): len(data)}  # (as the transfer reports it)
    assert transfers == ["warm.bin"]


def test_a_handed_over_answer_is_let_go_when_the_transfer_fails_before_taking_it(origin, tmp_path, monkeypatch):
    """The one-answer attempt hands a big answer to the transfer, and the transfer fails before
    its first request (here: opening its .part): the answer, its connection and the host's
    connection slot are let go, so the run's other files still get every slot."""
    from prefetch.errors import LocalFileError

    hosts = Hosts()
    _warm(origin, tmp_path, hosts)
    _put(origin, "big.bin", 600 * KiB, 7)
    host = hosts.host_for(origin.url_for("big.bin"))
    leased_before = host.leased
    handed = []
    real_try = transfer_module.single.try_single

    def spy(**kw):
        out = real_try(**kw)
        handed.append(out)
        return out

    def broken_open(self):
        raise LocalFileError("the disk went away")

    monkeypatch.setattr(transfer_module.single, "try_single", spy)
    monkeypatch.setattr(transfer_module._Transfer, "open", broken_open)
    with pytest.raises(LocalFileError):
        _get(origin.url_for("big.bin"), "big.bin", tmp_path, hosts)
    assert len(handed) == 1 and isinstance(handed[0], transfer_module.single.Handover), handed
    assert handed[0].resp is not None and handed[0].resp._raw.isclosed(), "the open answer is closed"
    assert host.leased == leased_before, "the connection slot went back to the host"
