"""The ``.part``, its running hash and its state file while a transfer runs (a part of ``transfer._Transfer``).

Opening it with what its resume record says; trimming, truncating and preallocating the
file, closing it when the last worker leaves, the contiguous prefix the hash has covered,
and snapshots of the state saved beside it.
"""

from __future__ import annotations

import os

from prefetch.fs.files import local_error, mib
from prefetch.engine.ranges import RangeSet
from prefetch.engine.resume_state import SMALL_FILE, TransferState, check_state, same_link_validators, usable_state


class PartAndState:
    """Mixed into ``_Transfer``: uses its lock, file, done ranges, hash, sources and saver."""

    def open(self) -> None:
        """Open the ``.part`` and take what its resume record says (or start it over)."""
        state, problem = check_state(self.state_file)
        if problem:
            self.note(f"the resume record {self.state_file.name} is unusable ({problem}); starting over")
        usable = usable_state(state, self.part, self.urls)
        if state is not None and not usable and state.done:
            self.note("saved state does not fit this download; starting over")
        self.file.open()
        if usable:
            self.size = state.size
            self.ranges_ok = state.ranges
            self.done = RangeSet(state.done)
            self.sources.restore(same_link_validators(state.validators, self.urls))
            self.reused = self.done.total()
            self.saver.synced = self.done.total()
            self._trim()
            if self.reused and self.algorithm is None and self.size:
                from prefetch.engine.resume_check import check_kept_bytes  # only a resume loads it

                check_kept_bytes(self)  # no hash will judge the result: sample the kept bytes first
            if self.reused:
                self.note(f"resuming: {mib(self.reused)} of {mib(self.size)} already on disk")
        else:
            self._truncate()
        self.hash.reset()

    def _trim(self) -> None:
        """A ``.part`` longer than the file (junk after it) is cut to the file's size."""
        try:
            length = os.fstat(self.file.fd).st_size
            if self.size is not None and length > self.size:
                os.ftruncate(self.file.fd, self.size)
                self.file.high = min(self.file.high, self.size)
                self.note(f"{self.part.name} held {length - self.size} bytes past the file's {self.size}; cut them")
        except OSError as exc:
            raise local_error(exc, self.part) from None

    def _truncate(self) -> None:
        self.file.truncate()
        self.size = None
        self.done = RangeSet()
        self.reused = 0  # bytes from an earlier run are gone: report what this run really reused
        self.saver.synced = 0
        self.sources.forget()
        self.dirty = True

    def _preallocate_locked(self) -> None:
        # A small file is written in one or two writes: reserving it first is a syscall for nothing.
        if self.opt.preallocate and self.size and self.size > SMALL_FILE:
            self.file.preallocate(self.size, needed=self._remaining())

    def _remaining(self) -> int | None:
        return None if self.size is None else self.size - self.done.total()

    def _close_part(self) -> None:
        """Close the ``.part`` now, or, while a worker still runs, when the last one leaves."""
        with self.lock:
            self.closing = True
            if self.active_workers:
                return
        self.file.close()

    def worker_left(self, worker_id: int) -> None:
        """A worker thread ends (its very last step)."""
        if self.host is not None:
            self.host.release()
        with self.lock:
            self.answered.discard(worker_id)
            self.active_workers -= 1
            self.wake.notify_all()
            last = self.closing and not self.active_workers
        if last:
            self.file.close()

    def _prefix_end(self) -> int:
        return self.done.prefix_end()  # (self.done is replaced when the file starts over)

    def _catch_up_hash(self) -> None:
        self.hash.catch_up(self._prefix_end, self.lock)

    def _snapshot(self, force: bool) -> tuple[TransferState, int, int | None] | None:
        """(the state to save, bytes done in it, the .part's fd), or None when nothing changed."""
        with self.lock:
            if not (self.dirty or force):
                return None
            self.dirty = False
            done = self.done
            if self.unconfirmed:  # (bytes that may be a pipelined answer's, engine/ahead.py: not yet)
                done = RangeSet(done.as_list())
                for lo, hi in self.unconfirmed.values():
                    done.remove(lo, hi)
                self.dirty = True  # (saved again once they are confirmed)
            state = TransferState(urls=self.urls, size=self.size, ranges=self.ranges_ok,
                                  validators={s.url: s.validators() for s in self.sources.all},
                                  done=done.as_list(), algorithm=self.algorithm)
            return state, done.total(), self.file.fd

    def _unflushed(self) -> int:
        """Bytes written since the last ``fdatasync`` (0 when saves do not flush)."""
        return self.done.total() - self.saver.synced if self.saver.sync else 0

    def _save_soon(self) -> None:
        self.saver.save_soon(lambda: self._snapshot(False))

    def _join_saver(self) -> None:
        self.saver.join()

    def _save_state(self, *, force: bool = False) -> None:
        self.saver.save(self._snapshot(force), small_record=self.opt.small_record)
