"""Flushing as the bytes arrive: a resume record every ``sync_every`` bytes, not only by time.

On a fast link a whole file can arrive between two saves by time (``state_interval``, 0.5 s):
the disk then writes it all in the final ``fdatasync`` and a kill before that keeps nothing.
With ``sync_every`` the ``.part`` is flushed and the record saved each time that many bytes
arrived since the last flush, while the rest is still arriving (``engine/transfer.py``).
"""

from __future__ import annotations

import random
import threading
import time

from prefetch.engine.options import TransferOptions
from prefetch.engine.ranges import RangeSet
from prefetch.engine.resume_state import load_state
from prefetch.engine.transfer import download_to_part
from prefetch.net.http import Timeouts

MiB = 1 << 20


def _records_seen(origin, tmp_path, **options) -> tuple[bytes, list[int]]:
    """Download 8 MiB at 2 MiB/s on one connection; the bytes each record named while it ran.

    Every record read on the way must name only bytes the ``.part`` really holds.
    """
    data = random.Random(5).randbytes(8 * MiB)
    origin.put("f.bin", data)
    origin.rate = 2 * MiB
    part, state_file = tmp_path / "f.bin.part", tmp_path / "f.bin.part.json"
    seen: list[int] = []
    wrong: list[str] = []
    finished = threading.Event()

    def watch() -> None:
        while not finished.is_set():
            state = load_state(state_file)
            if state is not None:
                done = RangeSet(state.done)
                held = part.read_bytes()
                wrong.extend(f"{a}-{b}" for a, b in done.as_list() if held[a:b] != data[a:b])
                seen.append(done.total())
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        download_to_part(
            urls=[origin.url_for("f.bin")], part=part, state_file=state_file, algorithm=None,
            options=TransferOptions(connections=1, max_connections=1, state_interval=3600.0,
                                    timeouts=Timeouts(connect=3, read=3), **options),
            on_event=lambda event: None)
    finally:
        finished.set()
        watcher.join()
    assert wrong == [], f"records named bytes the .part did not hold: {wrong}"
    return part.read_bytes() == data, sorted({n for n in seen if n < len(data)})


def test_a_record_is_saved_every_sync_every_bytes_while_the_file_arrives(origin, tmp_path):
    complete, partial_records = _records_seen(origin, tmp_path, sync_every=1 * MiB)

    assert complete
    # Saves by time are an hour apart here: every record before the end came from the byte count.
    assert len(partial_records) >= 3, partial_records
    assert partial_records[0] >= 1 * MiB


def test_sync_every_0_saves_by_time_only(origin, tmp_path):
    complete, partial_records = _records_seen(origin, tmp_path, sync_every=0)

    assert complete
    assert partial_records == []
