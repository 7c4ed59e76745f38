"""A name whose first address does not answer: the next one is tried 250 ms later, not after the
connect timeout (Happy Eyeballs, RFC 8305), and the address that answered goes first from then on.

A host with an IPv6 address on a machine whose IPv6 route drops packets (a half-configured VPC,
a notebook image with a global IPv6 address and no working route), or a name with one dead
replica among its addresses: prefetch tried each address in turn with the whole connect timeout
(10 s) on each, for every new connection of every file. Now the connects are staggered: the
next address is tried when the one before has not connected within 250 ms (or at once when it
failed), the first to connect wins and the others are closed.

The dead address here is a real listener on 127.0.0.2 whose accept queue is full (the kernel
drops the SYNs: a connect to it hangs, as to a black hole); nginx serves on 127.0.0.1 at the
same port. ``PREFETCH_RESOLVE=name=A|B`` gives a name several addresses, as a DNS answer would.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading

import pytest

from prefetch.net.open_socket import abort_head, connect_watched, resolve_overrides
from tests.conftest import run_cli
from tests.nginx import NginxServer


class _BlackHole:
    """A listener on ``host:port`` whose accept queue is full: connects to it hang."""

    def __init__(self, host: str, port: int) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, port))
        self.listener.listen(0)
        port = self.listener.getsockname()[1]
        self.fillers = []
        for _ in range(3):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex((host, port))
            self.fillers.append(s)
        threading.Event().wait(0.2)  # (their handshakes done: the queue is full)
        probe = socket.socket()
        probe.settimeout(1.5)
        try:
            probe.connect((host, port))
            raise AssertionError("the black hole accepted a connection")
        except socket.timeout:
            pass  # hangs, as wanted
        finally:
            probe.close()

    def close(self) -> None:
        for s in self.fillers:
            s.close()
        self.listener.close()


@pytest.fixture
def dead_and_live(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    data = os.urandom(2 << 20)
    (www / "weights.bin").write_bytes(data)
    with NginxServer(www, limit_rate="1m") as nginx:
        hole = _BlackHole("127.0.0.2", nginx.port)
        try:
            yield nginx, data
        finally:
            hole.close()


LOOPBACKS = pytest.mark.allow_hosts(["127.0.0.1", "127.0.0.2", "127.0.0.3"])  # (all loopback: 127/8)


@LOOPBACKS
def test_several_addresses_are_raced_and_the_live_one_wins(dead_and_live):
    nginx, _data = dead_and_live
    first = connect_watched("127.0.0.2|127.0.0.1", nginx.port, 30.0)
    try:
        assert first.getpeername() == ("127.0.0.1", nginx.port)
        assert first.gettimeout() == 30.0
    finally:
        first.close()
    # The address that answered goes first now: the next connect needs no race.
    again = connect_watched("127.0.0.2|127.0.0.1", nginx.port, 30.0)
    try:
        assert again.getpeername() == ("127.0.0.1", nginx.port)
    finally:
        again.close()


@LOOPBACKS
def test_a_stop_ends_a_race_of_dead_addresses(tmp_path):
    hole1 = _BlackHole("127.0.0.2", 0)
    port = hole1.listener.getsockname()[1]
    hole2 = _BlackHole("127.0.0.3", port)
    outcome: list = []

    def connect() -> None:
        try:
            outcome.append(connect_watched("127.0.0.2|127.0.0.3", port, 60.0))
        except OSError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=connect)
    worker.start()
    try:
        threading.Event().wait(0.6)  # (both attempts started: the second 250 ms after the first)
        abort_head(worker.ident)
        worker.join(timeout=20)
        assert not worker.is_alive(), "the connect ignored the stop"
        assert outcome and isinstance(outcome[0], OSError), outcome
    finally:
        hole1.close()
        hole2.close()


def test_resolve_takes_several_addresses():
    assert resolve_overrides({"PREFETCH_RESOLVE": "hub.test=127.0.0.2|[::1]|127.0.0.1"}) == {
        "hub.test": "127.0.0.2|::1|127.0.0.1"}


@LOOPBACKS
def test_a_download_from_a_name_whose_first_address_is_dead_completes(home, dead_and_live, tmp_path):
    nginx, data = dead_and_live
    out = tmp_path / "weights.bin"
    env = dict(os.environ, PREFETCH_RESOLVE="mirror.test=127.0.0.2|127.0.0.1", PREFETCH_CONNECT_TIMEOUT="60",
               NO_PROXY="*")
    # Before: the first connect waited out its 60 s on the dead address, past the whole --timeout.
    done = run_cli("get", f"http://mirror.test:{nginx.port}/weights.bin", "-o", str(out), "--timeout", "20",
                   "--connections", "4", "--sha256", hashlib.sha256(data).hexdigest(), env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == data
