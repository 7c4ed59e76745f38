"""The shared budget's protocol between processes, step by step (engine/shared_budget.py).

Two opens of one slot file are two open file descriptions: their OFD locks exclude each other
exactly as two processes' do, so each ``SharedSlots`` here stands for a process.
"""

from __future__ import annotations

import os
import stat

import pytest

from prefetch.engine.shared_budget import LOOK, RETRY, SharedSlots, open_shared
from prefetch.fs import slots as slot_files

pytestmark = pytest.mark.skipif(not slot_files.AVAILABLE, reason="no OFD locks here")

HOST = "http://mirror.example:80"


def _two(tmp_path, cap: int = 3) -> tuple[SharedSlots, SharedSlots]:
    return open_shared(str(tmp_path / "slots"), HOST, cap), open_shared(str(tmp_path / "slots"), HOST, cap)


def test_a_waiter_is_made_room_for_and_extras_wait_behind_it(tmp_path):
    a, b = _two(tmp_path)
    try:
        assert a.grow(1, 0.0) and a.grow(2, 0.0) and a.grow(3, 0.0)  # alone: the whole cap
        assert a.held == [0, 1, 2]
        assert not b.grow(1, 0.0)  # every slot taken, and a holds extras: b waits ...
        assert b.waiting and b.allowance == 0
        a.look(1.0)  # ... a sees it and runs one fewer
        assert a.limit == 2 and a.others_wait
        a.shrink(2)  # (its worker stepped back)
        assert not a.grow(3, 1.0 + RETRY)  # the freed slot is not a's to take back
        assert b.grow(1, 1.0)
        assert b.held == [2] and not b.waiting
        a.look(1.0 + 2 * LOOK)
        assert a.limit is None and not a.others_wait
        b.shrink(0)
        assert a.grow(3, 2.0)  # free again: a takes it as an extra
    finally:
        a.close()
        b.close()


def test_a_slot_freed_for_a_waiter_is_not_taken_by_a_process_that_had_no_extras(tmp_path):
    a, c = _two(tmp_path)
    b = open_shared(str(tmp_path / "slots"), HOST, 3)
    try:
        assert a.grow(2, 0.0) and c.grow(1, 0.0)
        assert not b.grow(1, 0.0)  # waits: a holds extras
        a.look(1.0)
        c.look(1.0)
        assert a.limit == 1 and c.others_wait
        a.shrink(1)
        assert not c.grow(2, 1.0)  # a free slot, but b waits for it
        assert b.grow(1, 1.0) and b.held == [1]
    finally:
        for s in (a, b, c):
            s.close()


def test_over_the_cap_only_when_every_slot_is_someones_only_one(tmp_path):
    holders = [open_shared(str(tmp_path / "slots"), HOST, 2) for _ in range(2)]
    late = open_shared(str(tmp_path / "slots"), HOST, 2)
    try:
        assert all(h.grow(1, 0.0) for h in holders)
        assert late.grow(1, 0.0)  # nobody holds extras: one connection, without a slot
        assert late.bare and late.held == [] and late.waiting
        assert not late.grow(2, 0.0)  # and no more
        holders[0].shrink(0)
        late.look(1.0)  # a slot is free: the bare connection takes it
        assert late.held == [0] and not late.bare and not late.waiting
    finally:
        for s in (*holders, late):
            s.close()


def test_a_closed_holders_slots_are_free_at_once(tmp_path):
    a, b = _two(tmp_path, cap=2)
    try:
        assert a.grow(2, 0.0)
        a.close()  # (a process that dies closes its descriptors the same way)
        assert b.grow(2, 0.0) and b.held == [0, 1]
    finally:
        b.close()


def test_the_slot_file_is_private_and_never_followed(tmp_path):
    directory = tmp_path / "slots"
    a = open_shared(str(directory), HOST, 2)
    try:
        path = directory / slot_files.slot_file_name(HOST)
        st = os.lstat(path)
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 0
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        assert a.grow(2, 0.0) and os.stat(path).st_size == 0  # locks only, nothing written
    finally:
        a.close()
    target = tmp_path / "victim"
    target.write_bytes(b"keep")
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    os.symlink(target, other / slot_files.slot_file_name(HOST))
    assert open_shared(str(other), HOST, 2) is None  # a link at the name: nothing shared, nothing written
    assert target.read_bytes() == b"keep"


def test_a_bare_connection_that_takes_a_slot_stops_waiting(tmp_path):
    holders = [open_shared(str(tmp_path / "slots"), HOST, 2) for _ in range(2)]
    late = open_shared(str(tmp_path / "slots"), HOST, 2)
    watcher = slot_files.open_slots(str(tmp_path / "slots"), HOST)
    try:
        assert all(h.grow(1, 0.0) for h in holders)
        assert late.grow(1, 0.0) and late.bare
        assert watcher.marked(slot_files.WAITING)
        holders[1].shrink(0)
        assert not late.grow(2, 1.0)  # one slot free: its bare connection's, not a second one
        assert late.held == [1] and not late.bare
        assert not watcher.marked(slot_files.WAITING)  # nobody is made to wait for it any more
    finally:
        for s in (*holders, late):
            s.close()
        watcher.close()
