"""How long a request's range is: the whole share at the end of a settled transfer, half before.

A request costs ~1-1.5 ms of CPU (a head to send and parse, the bookkeeping around it). A
window is half of its connection's share of what is left, so that connections the ramp adds,
and the ones that finish first, find unasked bytes to split without cutting into a range in
flight (bytes the server would stream past the cut). At the end of a transfer whose count is
settled on many connections (16 or more), when each connection's whole share is at most what
it reads in about a second, a connection asks for all of it in one request instead of halves
of halves: on the throttled 200 MiB bench row at 32 connections, 55-67 requests instead of
~110-130.

These drive the real :class:`Schedule` (the transfer's timing on a loaded machine decides
when the end comes; the bench counts the requests of whole runs).
"""

from __future__ import annotations

from prefetch.engine.schedule import Schedule, Segment

MIB = 1 << 20


def window(*, remaining: int, workers: int, paced: int, settled: bool, seg_len: int = 64 * MIB) -> int:
    schedule = Schedule(min_split=512 << 10)
    seg = Segment(0, 0, seg_len, owner=1)
    return schedule.request_end(seg, 0, remaining=remaining, workers=workers, smallest=512 << 10,
                                least=1 * MIB, most=64 * MIB, paced=paced, settled=settled)


def test_at_the_end_of_a_settled_transfer_a_connection_asks_for_its_whole_share():
    # 200 MiB left over 32 connections that each read ~7 MiB a second: 6.25 MiB each, in one request.
    assert window(remaining=200 * MIB, workers=32, paced=7 * MIB, settled=True) == 200 * MIB // 32


def test_while_connections_may_still_come_a_request_asks_for_half_its_share():
    assert window(remaining=200 * MIB, workers=32, paced=7 * MIB, settled=False) == 200 * MIB // 64


def test_a_share_longer_than_the_pace_stays_halved_so_the_first_to_finish_splits_unasked_bytes():
    # 32 connections at ~7 MiB/s with 600 MiB left: a window is the pace, and a segment's rest
    # beyond it stays unasked (2 MiB here) for the first connection to finish.
    assert window(remaining=600 * MIB, workers=32, paced=7 * MIB, settled=True, seg_len=9 * MIB) == 7 * MIB


def test_few_connections_keep_half_their_share_to_the_end():
    # 1 GiB over 2 connections on a loaded machine: whole shares were cut in flight by the one
    # that finished first (bytes served up to 1.07 x the file); one share there is half of what is left.
    assert window(remaining=40 * MIB, workers=2, paced=25 * MIB, settled=True) == 10 * MIB
    assert window(remaining=40 * MIB, workers=2, paced=25 * MIB, settled=True, seg_len=24 * MIB) == 10 * MIB


def test_the_rest_of_a_segment_shorter_than_half_a_window_goes_with_it_at_the_end():
    # 6.25 MiB windows: a segment of 9 MiB is asked whole rather than leaving 2.75 MiB for a steal.
    assert window(remaining=200 * MIB, workers=32, paced=7 * MIB, settled=True, seg_len=9 * MIB) == 9 * MIB
    assert window(remaining=200 * MIB, workers=32, paced=7 * MIB, settled=False, seg_len=9 * MIB) == 200 * MIB // 64
