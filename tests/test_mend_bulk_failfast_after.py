"""``--fail-fast`` with the bulk lane: once a file's failure is known, no file is placed whose
request went out after it, and the lane places nothing after it at all (a chunk's flush and
renames check the stop before each file: the one being placed then may finish, as the usual
path's files already in flight do).
A 404 in the middle of a 400-file list on a keep-alive origin on 127.0.0.1 that notes when
each request arrived; the real API in-process, its events timed on the same clock."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from prefetch.model.events import EventKind
from tests.bulk_origin import BulkOrigin

COUNT = 400
FAILING = 200


class _TimedLog(list):
    """The origin's request log, each entry with the monotonic time it arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, entry) -> None:
        self.times.append(time.monotonic())
        super().append(entry)


@pytest.mark.parametrize("round_", range(3))
def test_nothing_is_placed_after_a_failure_is_known(home, tmp_path, monkeypatch, round_):
    import prefetch
    from prefetch.errors import PrefetchError

    monkeypatch.setenv("PREFETCH_BULK", "1")
    files = {f"f{i:03d}.bin": hashlib.sha256(b"%d" % i).digest() * 256 for i in range(COUNT)}
    failing = f"f{FAILING:03d}.bin"
    out = tmp_path / "out"
    events: list[tuple[float, str, str]] = []

    def note(event) -> None:
        if event.kind in (EventKind.FAILED, EventKind.DONE):
            events.append((time.monotonic(), event.kind.value, event.file))

    with BulkOrigin(files, {failing: "404"}) as origin:
        origin.log = log = _TimedLog()
        with pytest.raises(PrefetchError):
            prefetch.ensure([origin.url_for(n) for n in files], output_dir=str(out), fail_fast=True,
                            on_event=note, progress=False)
        assert origin.lane(), "the lane took part"
    failed_at = min(t for t, kind, _ in events if kind == "failed")
    first_asked: dict[str, float] = {}
    lane_asked: set[str] = set()
    for at, (_, path, _, lane) in zip(log.times, log):
        first_asked.setdefault(path.lstrip("/"), at)
        if lane:
            lane_asked.add(path.lstrip("/"))
    placed = {p.name for p in out.iterdir() if p.name in files}
    late = sorted(n for n in placed if first_asked.get(n, 0) > failed_at)
    assert not late, f"{len(late)} files placed whose request went out after the failure was known: {late[:10]}"
    # (a file's DONE follows its rename, its record and its other events: the one a chunk was
    # placing when the failure came may say DONE after it; before the fix, 188-201 files did)
    lane_late = sorted(f for t, kind, f in events if kind == "done" and t > failed_at and f in lane_asked)
    assert len(lane_late) <= 2, f"the lane placed {len(lane_late)} files after the failure was known: {lane_late[:10]}"
    for name in placed:
        assert (out / name).read_bytes() == files[name], name
