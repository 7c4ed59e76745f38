"""Files a bulk-lane chunk hands back go to the usual path on the run's free threads, side by
side, not one after another on the chunk's thread: a chunk broken early (a reset, a 503) hands
back up to 255 files, which on one thread took 4 s where the usual path takes 1 s (a 10 ms server)."""

from __future__ import annotations

import hashlib
import os
import threading
import time

from tests.bulk_origin import BulkOrigin

COUNT = 200  # (fewer than a chunk: no file after the chunk runs beside its handed-back files)


class CountingOrigin(BulkOrigin):
    """Once the tricked file was asked for, each request of the usual path's (not the lane's range)
    waits 50 ms before its answer; ``most`` is how many of those were being answered at once."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.broken = threading.Event()
        self.number = threading.local()
        self.now = 0
        self.most = 0

    def _serve(self, conn, number: int) -> None:
        self.number.value = number
        super()._serve(conn, number)

    def _answer(self, conn, name, ranged) -> bool:
        with self._lock:  # (this thread's connection's request, logged just now)
            lane = next(entry[3] for entry in reversed(self.log) if entry[0] == self.number.value)
        if name in self.tricks:
            self.broken.set()
            return super()._answer(conn, name, ranged)
        if not self.broken.is_set() or lane:
            return super()._answer(conn, name, ranged)
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(0.05)
            return super()._answer(conn, name, ranged)
        finally:
            with self._lock:
                self.now -= 1


def test_a_chunk_broken_early_hands_its_files_to_the_runs_threads(home, tmp_path, cli):
    """A reset at the lane's first answers ends the lane for the host; the chunk's other files go
    the usual way, several at once (the server sees more than one of their requests at a time);
    every file arrives byte-exact, exit 0."""
    files = {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * 512 for i in range(COUNT)}
    tricked = "f080.bin"
    with CountingOrigin(files, {tricked: "once-reset"}) as origin:
        listing = tmp_path / "list.txt"
        listing.write_text("".join(f"{origin.url_for(name)}\n" for name in files))
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "-q", env={**os.environ, "PREFETCH_BULK": "1"})
        assert proc.returncode == 0, proc.stderr
        assert origin.lane(tricked), "the lane asked for the tricked file"
        assert origin.broken.is_set()
        most = origin.most
    for name, data in files.items():
        assert (out / name).read_bytes() == data, name
    assert most >= 2, "the files the chunk handed back were fetched one after another"
