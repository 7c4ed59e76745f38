"""A server's connection cap is counted once the connections asked with the refused one answer.

A mirror that caps connections per client answers the ones beyond its cap 503 at once, and the
ones it serves after its own time (a busy mirror, or a loaded client that reads their heads
late). ``Fetcher._crowded`` counts the connections delivering as the cap: counted before the
served ones' answers were in, the cap came out as the probe's one connection and held for
``cap_retry`` (at load ~6 one bench capped run in 14 took 25.8 s, 48 MiB at one connection's
2 MiB/s, on main as on this branch: the likely cause, not traced). A scripted server on
127.0.0.1 counts, per connection, the ranges it served.

Under load (pip unpacking and byte-compiling beside it) the note said 1 in 4 of 40 runs: the
probe's answer came after 40 ms, so the transfer opened connections ahead of it
(``engine/preconnect.py``), and the pass of the main loop that had counted one connection
for the probe (size unknown) saw the size the answer had just set and sent them all back
unused: the server's second connection carried no request, and the workers' new ones were
refused. A pass now reads the size once (``engine/transfer.py``).
"""

from __future__ import annotations

import hashlib
import random
import re
import time

from prefetch.engine.options import TransferOptions
from prefetch.model.events import EventKind
from prefetch.engine.transfer import download_to_part
from prefetch.net.http import Timeouts
from tests.keepalive import Listener

KiB, MiB = 1 << 10, 1 << 20
DATA = random.Random(2026).randbytes(3 * MiB + 777)
_RANGE = re.compile(rb"\r\nRange: bytes=(\d+)-(\d*)", re.I)


class SlowSecondServer(Listener):
    """Connection 1 and 2 are served, each answer 50 ms after its request (2's first ``late``
    seconds after it); every connection after them gets 503 to its first request and is closed."""

    def __init__(self, late: float) -> None:
        self.late = late
        self.served: dict[int, int] = {}  # connection -> answers with a body
        self.refused = 0
        self.listen()
        self.url = f"http://127.0.0.1:{self.port}/file.bin"

    def _serve(self, conn, number: int) -> None:
        with conn:
            for head in self.heads(conn):
                if number > 2:
                    self.refused += 1
                    conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return
                time.sleep(self.late if number == 2 and not self.served.get(2) else 0.05)  # (each answer: a busy mirror)
                match = _RANGE.search(head)
                size = len(DATA)
                first, last = (int(match.group(1)), int(match.group(2) or size - 1)) if match else (0, size - 1)
                last = min(last, size - 1)
                body = DATA[first:last + 1]
                self.served[number] = self.served.get(number, 0) + 1
                try:
                    conn.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Length: %d\r\nContent-Range: bytes %d-%d/%d\r\n"
                                 b"ETag: \"v1\"\r\n\r\n%s" % (len(body), first, last, size, body))
                except OSError:
                    return


def test_a_cap_is_counted_with_the_connection_whose_answer_comes_late(tmp_path):
    server = SlowSecondServer(late=0.4)
    opts = TransferOptions(initial_connections=4, max_connections=4, first_request=256 * KiB, request_min=128 * KiB,
                           request_max=128 * KiB, min_split=64 * KiB, backoff_base=0.05, backoff_cap=0.1,
                           timeouts=Timeouts(connect=5, read=5))
    events = []
    try:
        part = tmp_path / "file.bin.part"
        result = download_to_part(urls=[server.url], part=part, state_file=tmp_path / "file.bin.part.json",
                                  algorithm="sha256", options=opts, on_event=events.append)
    finally:
        server.close()
    assert part.read_bytes() == DATA and result.digest == hashlib.sha256(DATA).hexdigest()
    assert server.refused >= 2  # (two refusals: the second sets the cap)
    # The cap was counted as two, the late connection with the probe's ...
    notes = [e.message for e in events if e.kind is EventKind.NOTE]
    assert any("staying at 2 connections" in n for n in notes), notes
    # ... and the late connection went on serving ranges beside the probe's. (Counted before its
    # answer, the cap was one: the late connection stepped back after its first.) How many more
    # it serves is the machine's timing (a loaded CI runner once gave it 2 of 12): not asserted.
    assert server.served.get(2, 0) >= 2, server.served
