"""Sets of half-open byte ranges ``[start, end)``: what is on disk, what is missing."""

from __future__ import annotations

from typing import Iterable


class RangeSet:
    """Sorted, non-overlapping, merged half-open ranges."""

    def __init__(self, ranges: Iterable[Iterable[int]] = ()) -> None:
        self._ranges: list[list[int]] = []
        for start, end in ranges:
            self.add(int(start), int(end))

    def add(self, start: int, end: int) -> None:
        """Mark ``[start, end)`` as covered, merging with neighbours."""
        if end <= start:
            return
        merged: list[list[int]] = []
        placed = False
        for lo, hi in self._ranges:
            if hi < start:
                merged.append([lo, hi])
            elif end < lo:
                if not placed:
                    merged.append([start, end])
                    placed = True
                merged.append([lo, hi])
            else:
                start, end = min(lo, start), max(hi, end)
        if not placed:
            merged.append([start, end])
        merged.sort()
        self._ranges = merged

    def remove(self, start: int, end: int) -> None:
        """Mark ``[start, end)`` as not covered."""
        kept: list[list[int]] = []
        for lo, hi in self._ranges:
            if hi <= start or lo >= end:
                kept.append([lo, hi])
                continue
            if lo < start:
                kept.append([lo, start])
            if hi > end:
                kept.append([end, hi])
        self._ranges = kept

    def total(self) -> int:
        """Number of bytes covered."""
        return sum(hi - lo for lo, hi in self._ranges)

    def prefix_end(self) -> int:
        """End of the contiguous run starting at byte 0 (0 when byte 0 is missing)."""
        if self._ranges and self._ranges[0][0] == 0:
            return self._ranges[0][1]
        return 0

    def missing(self, size: int) -> list[tuple[int, int]]:
        """The gaps in ``[0, size)``."""
        gaps, pos = [], 0
        for lo, hi in self._ranges:
            if lo > pos:
                gaps.append((pos, min(lo, size)))
            pos = max(pos, hi)
            if pos >= size:
                break
        if pos < size:
            gaps.append((pos, size))
        return [(lo, hi) for lo, hi in gaps if hi > lo]

    def covers(self, size: int) -> bool:
        """True when every byte of ``[0, size)`` is covered."""
        return not self.missing(size)

    def as_list(self) -> list[list[int]]:
        """A JSON-friendly copy."""
        return [list(r) for r in self._ranges]

    def __len__(self) -> int:
        return len(self._ranges)

    def __repr__(self) -> str:
        return f"RangeSet({self._ranges})"
