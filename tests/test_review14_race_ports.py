"""Happy Eyeballs (net/open_socket.py): the address that answered goes first for its name on
every port, not only the port it answered on. A name whose first address is dead, used on two
ports (a mirror's http that redirects to its https, a hub and its LFS port), raced again at
each change of port: 250 ms more per connection while the ports took turns."""

from __future__ import annotations

import os
import socket

import pytest

from prefetch.net import open_socket
from prefetch.net.open_socket import _in_turn, connect_watched
from tests.nginx import NginxServer

LOOPBACKS = pytest.mark.allow_hosts(["127.0.0.1", "127.0.0.2"])


def _entries(where: str, port: int) -> list:
    found = []
    for name in where.split("|"):
        found += socket.getaddrinfo(name, port, socket.AF_INET, socket.SOCK_STREAM)
    return found


@LOOPBACKS
def test_the_address_that_answered_goes_first_on_another_port_too(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    (www / "f.bin").write_bytes(os.urandom(1024))
    where = "127.0.0.2|127.0.0.1"  # (a name unique to this test: the table is the process's)
    open_socket._answered.pop(where, None)
    with NginxServer(www) as nginx:
        sock = connect_watched(where, nginx.port, 30.0)  # (127.0.0.2 refuses: the live one wins)
        sock.close()
    other_port = nginx.port + 1
    order = [entry[4][0] for entry in _in_turn(where, _entries(where, other_port))]
    assert order == ["127.0.0.1", "127.0.0.2"], order


@LOOPBACKS
def test_a_name_of_several_that_does_not_resolve_leaves_the_others(tmp_path):
    """``PREFETCH_RESOLVE=host=A|B`` where A is a name that does not resolve (here one the
    resolver refuses outright, an empty label): B is connected to; before, the whole connect
    failed with A's lookup error."""
    www = tmp_path / "www"
    www.mkdir()
    (www / "f.bin").write_bytes(os.urandom(1024))
    with NginxServer(www) as nginx:
        sock = connect_watched("bad..name|127.0.0.1", nginx.port, 30.0)
        try:
            assert sock.getpeername() == ("127.0.0.1", nginx.port)
        finally:
            sock.close()
        with pytest.raises(UnicodeError):
            connect_watched("bad..name", nginx.port, 30.0)  # (alone, its own error as before)
