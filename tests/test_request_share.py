"""Fewer requests once the connection count is settled: each connection asks for its share.

A request costs ~1.5 ms of CPU (a head to send and parse, the bookkeeping around it). While
the ramp may still add connections, a request asks for half of its connection's share, so a
new connection finds unasked bytes to split; once the count is settled (``--connections N``,
or the ramp is done) and the connection's pace is known, a request asks for the whole share
of what is left. nginx's own log counts the requests.
"""

from __future__ import annotations

import os

from tests.nginx import NginxServer, nginx_binary
from tests.test_faults import get_file
from tests.test_no_waste import sent_intervals

MIB = 1 << 20


def test_a_settled_connection_asks_for_its_whole_share_not_halves_of_halves(home, tmp_path):
    assert nginx_binary(), "nginx is required: tests/run.sh installs it"
    size, connections = 32 * MIB, 4
    root = tmp_path / "root"
    root.mkdir()
    data = os.urandom(size)
    (root / "f.bin").write_bytes(data)
    out = tmp_path / "out" / "f.bin"
    out.parent.mkdir()
    # A loaded machine's slow first answer must not pass for a long route (1 MiB pieces there).
    env = dict(os.environ, PREFETCH_LONG_ROUTE="5")
    # Throttled per connection, so the connections' pace is known before most requests go out.
    with NginxServer(root, limit_rate="8m") as nginx:
        result = get_file(nginx.url_for("f.bin"), out, env=env, connections=connections, deadline=120)
        assert result.exit_code == 0, result.error
        assert out.read_bytes() == data
        answers = sent_intervals(nginx)
    # Every byte once (the shares tile the file) ...
    assert sum(end - first for first, end, *_ in answers) == size
    # ... in a request or two per connection (9 here): halves of what is left, asked again and
    # again, took 18-32.
    assert len(answers) <= 3 * connections, [a for *_, a in answers]
