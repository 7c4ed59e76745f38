"""``prefetch.as_completed`` used as a hostile (or just unusual) caller would, against the real origin."""

from __future__ import annotations

import gc
import os
import signal
import time
import weakref

import pytest

import prefetch
from tests.test_stream import no_stream_threads, put_shards, stream

KiB = 1 << 10


def test_streams_closed_out_of_order_put_the_interrupt_handler_back(origin, home, tmp_path):
    """Two streams open at once (train and validation zipped) and closed in the order they
    were opened: the SIGINT handler ends as it was, and holds no closed stream's feed. Before,
    the second close put the first stream's handler back for good (each such pair chained
    one more, each keeping its feed and results alive)."""
    entries, names, _ = put_shards(origin, [64 * KiB] * 3)
    origin.total_rate = 256 * KiB
    before = signal.getsignal(signal.SIGINT)
    train = stream(entries, tmp_path / "train")
    val = stream(entries, tmp_path / "val")
    feed = weakref.ref(train._feed)
    assert next(train).name == names[0] and next(val).name == names[0]
    train.close()
    val.close()
    assert signal.getsignal(signal.SIGINT) is before
    del train
    gc.collect()
    assert feed() is None  # nothing holds the closed stream any more
    assert no_stream_threads()


def test_an_interrupt_stops_every_open_stream_and_still_reaches_the_caller(origin, home, tmp_path):
    entries, names, _ = put_shards(origin, [512 * KiB] * 3)
    origin.total_rate = 128 * KiB
    a = stream(entries, tmp_path / "a")
    b = stream(entries, tmp_path / "b")
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # the handler raises here
    # both stop: each ends with the resumable-stop error at its next step, not a path
    for paths in (a, b):
        with pytest.raises(prefetch.InterruptedTransferError):
            list(paths)
    assert no_stream_threads()
    a.close()
    b.close()
