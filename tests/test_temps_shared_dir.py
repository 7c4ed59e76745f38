"""Temp files left by killed writers are cleaned only where their pid means something.

``replace_file`` and ``export`` write ``.<name>.<pid>-<hex>.tmp`` then rename it; a rerun
removes the temps of writers that are no longer running (fs.files.remove_dead_temps). On a
folder shared between machines (NFS, a team's export dir), another machine's live writer has
a pid that is not running here: its temp must be left alone. The name carries a host tag.
"""

from __future__ import annotations

import os
import subprocess
import sys

from prefetch.fs.files import remove_dead_temps, replace_file, temp_name


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_dead_writers_temp_of_this_machine_is_removed_another_machines_is_left(tmp_path):
    target = tmp_path / "data.bin"
    dead = _dead_pid()
    ours = temp_name(target)
    tag_and_random = ours.name.rsplit("-", 1)[1].removesuffix(".tmp")
    assert len(tag_and_random) == 16
    mine = tmp_path / f".data.bin.{dead}-{tag_and_random}.tmp"
    theirs = tmp_path / f".data.bin.{dead}-{'0' * 8 if tag_and_random[:8] != '0' * 8 else '1' * 8}abcd1234.tmp"
    legacy = tmp_path / f".data.bin.{dead}-abcd1234.tmp"  # a name of the form before the tag
    live = tmp_path / f".data.bin.{os.getpid()}-{tag_and_random}.tmp"
    for path in (mine, theirs, legacy, live):
        path.write_bytes(b"x")
    removed = remove_dead_temps(target)
    assert sorted(removed) == sorted([mine, legacy])
    assert theirs.exists() and live.exists()
    assert not mine.exists() and not legacy.exists()


def test_replace_file_writes_through_a_tagged_temp_and_leaves_none(tmp_path):
    target = tmp_path / "record.json"
    replace_file(target, b"{}")
    assert target.read_bytes() == b"{}"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]
