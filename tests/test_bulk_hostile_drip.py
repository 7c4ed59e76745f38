"""One answer of a chunk dripped slowly (a few bytes at a time, never long enough apart to trip
the read timeout): the lane waited for it before placing anything of its chunk, so up to 255
files already read sat unplaced for as long as the drip lasted (a stop then discarded them all),
where the usual path places every other file at once. The chunk now waits at most
``bulk.OWED_SECONDS`` past its last request: what is owed then goes the usual way."""

from __future__ import annotations

import hashlib
import os
import threading
import time

from tests.bulk_origin import BulkOrigin

COUNT = 120
SLOW = "f060.bin"


class DripOrigin(BulkOrigin):
    """``SLOW``'s first answer comes 256 bytes every 0.1 s (about 3 s in all); just before its
    last bytes (or when they would have come, the client gone), ``placed_then`` is how many
    files were in the output folder."""

    def __init__(self, files, out) -> None:
        super().__init__(files)
        self.out = out
        self.placed_then = None
        self.dripped = threading.Event()

    def _answer(self, conn, name, ranged) -> bool:
        with self._lock:
            first = self.asked[name] == 0
        if name != SLOW or not first:
            return super()._answer(conn, name, ranged)
        with self._lock:
            self.asked[name] += 1
        data = self.files[name]
        conn.sendall(b"HTTP/1.1 206 Partial Content\r\nContent-Length: %d\r\nETag: \"v1\"\r\n"
                     b"Content-Range: bytes 0-%d/%d\r\n\r\n" % (len(data), len(data) - 1, len(data)))
        gone = False
        for at in range(0, len(data) - 256, 256):  # (its pace kept when the client has gone)
            if not gone:
                try:
                    conn.sendall(data[at:at + 256])
                except OSError:
                    gone = True
            time.sleep(0.1)
        self.placed_then = len([p for p in self.out.iterdir() if p.name in self.files and p.name != SLOW]) if self.out.exists() else 0
        self.dripped.set()
        conn.sendall(data[len(data) - 256:])
        return True


def test_a_dripped_answer_does_not_hold_its_chunks_other_files(home, tmp_path, cli):
    """Every other file is in place before the dripped one's last bytes come; all byte-exact, exit 0."""
    files = {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * 256 for i in range(COUNT)}
    out = tmp_path / "out"
    with DripOrigin(files, out) as origin:
        listing = tmp_path / "list.txt"
        listing.write_text("".join(f"{origin.url_for(name)}\n" for name in files))
        proc = cli("get", "-i", str(listing), "-P", str(out), "-q", env={**os.environ, "PREFETCH_BULK": "1"})
        assert proc.returncode == 0, proc.stderr
        assert origin.lane(SLOW), "the lane asked for the slow file"
        assert origin.dripped.wait(15)
        placed_then = origin.placed_then
    for name, data in files.items():
        assert (out / name).read_bytes() == data, name
    assert placed_then == COUNT - 1, f"{placed_then} of {COUNT - 1} other files placed while one answer dripped"
