"""The lock file beside a file (``<final>.part.lock``, fifteenth sitting) that a run killed with
``kill -9`` left before the file's ``.part`` existed: the same command run again took such a
file through the bulk lane (``get -i`` of many small files), which never opens the lock file,
so it stayed in the folder for ever beside the placed file (tests/test_bulk_stop.py's kill -9
test found 4 of them among 400 files in a full suite run). The lane's looks now see it and
leave the file to the usual path, which takes the lock and removes it. Lock files as kill -9
leaves them (an empty one, one with its dead holder's record); a real origin that pipelines
(tests/bulk_origin.py), so the lane takes part."""

from __future__ import annotations

import hashlib
import json

from tests.bulk_origin import BulkOrigin

COUNT = 120
ORPHANS = [f"f{i:03d}.bin" for i in range(60, 70)]  # (past the first files, which go the usual way)


def test_lock_files_a_killed_run_left_go_with_the_next_run(home, tmp_path, cli):
    files = {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * 256 for i in range(COUNT)}
    out = tmp_path / "out"
    out.mkdir()
    for i, name in enumerate(ORPHANS):
        record = {"pid": 999999999, "host": "gone", "started": 1.0, "target": str(out / name), "job": None}
        (out / f"{name}.part.lock").write_text("" if i % 2 else json.dumps(record))
    with BulkOrigin(files) as origin:
        listing = tmp_path / "urls.txt"
        listing.write_text("".join(f"{origin.url_for(n)} sha256={hashlib.sha256(d).hexdigest()}\n"
                                   for n, d in files.items()))
        got = cli("get", "-i", str(listing), "-P", str(out), "-q")
        assert origin.pipelined() > 10, "the lane took part"
    assert got.returncode == 0, got.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(files)  # (no lock file left)
    assert all((out / n).read_bytes() == d for n, d in files.items())
