"""``--fail-fast`` with the bulk lane: the usual path starts no file once one failed (those in
flight finish), so a 404 stops a list near it. The lane read and placed the rest of its chunk
(up to 255 files) before the file it handed back met its 404 on the usual path: ~170-190 files
placed past the failure where ``PREFETCH_BULK=0`` placed 0-5. An answer the lane hands back now
ends its chunk's requests under ``--fail-fast`` and the chunk's unasked files go the usual way."""

from __future__ import annotations

import hashlib
import os

from tests.bulk_origin import BulkOrigin

COUNT = 300
FAILING = 150


def test_fail_fast_stops_the_lane_at_the_file_it_hands_back(home, tmp_path, cli):
    files = {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * 512 for i in range(COUNT)}
    failing = f"f{FAILING:03d}.bin"
    with BulkOrigin(files, {failing: "404"}) as origin:
        listing = tmp_path / "list.txt"
        listing.write_text("".join(f"{origin.url_for(name)}\n" for name in files))
        out = tmp_path / "out"
        proc = cli("get", "-i", str(listing), "-P", str(out), "-q", "--fail-fast",
                   env={**os.environ, "PREFETCH_BULK": "1"})
        assert origin.lane(failing), "the lane asked for the failing file"
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert failing in proc.stderr and "404" in proc.stderr
    past = [p.name for p in out.iterdir() if p.name in files and int(p.name[1:4]) > FAILING]
    # (the lane's requests already sent, at most 2 x 8, and the usual path's files in flight)
    assert len(past) <= 40, f"{len(past)} files placed past the failure with --fail-fast"
    for name in os.listdir(out):
        if name in files:
            assert (out / name).read_bytes() == files[name], name
