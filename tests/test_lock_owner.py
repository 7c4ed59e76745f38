"""The lock holder's record is written in the lock file itself (issue 19: no temp file,
rename and unlink per file); another user's lock file keeps the ``.owner`` beside it."""

from __future__ import annotations

import os

from prefetch.fs.locks import hold_lock, lock_path, read_owner


def test_the_owner_is_recorded_in_the_lock_file_while_held(tmp_path):
    locks, target = tmp_path / "locks", tmp_path / "data.bin"
    path = lock_path(locks, target)
    with hold_lock(locks, target, timeout=1.0, job="j1") as waited:
        assert not waited
        owner = read_owner(path)
        assert owner is not None and owner.pid == os.getpid() and owner.job == "j1"
        assert sorted(p.name for p in locks.iterdir()) == [path.name]  # no .owner, no temp file
    assert read_owner(path) is None  # released: no owner left behind
    assert sorted(p.name for p in locks.iterdir()) == [path.name]


def test_an_owner_file_beside_the_lock_is_still_read(tmp_path):
    import json

    path = lock_path(tmp_path, tmp_path / "x.bin")
    path.write_bytes(b"")
    path.with_suffix(".owner").write_text(json.dumps({"pid": 7, "host": "h", "started": 1.0, "target": "x"}))
    assert read_owner(path).pid == 7
