"""The resume record beside ``<final>.part``: ``<final>.part.json``.

The record holds the file's size, whether the server honours Range, each source's
validator (ETag / Last-Modified) and the byte ranges that are really on disk; a
process killed at any point resumes from it with at most the bytes in flight lost.
Anything unexpected in it (another version, wrong types, ranges outside the file)
makes it unusable: the download starts over rather than trust it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from prefetch.fsutil import local_error, replace_file
from prefetch.ranges import RangeSet

STATE_VERSION = 1


@dataclass
class TransferState:
    """The resume record kept beside ``.part``."""

    urls: list[str]
    size: int | None = None
    ranges: bool = True  # server honours Range (as far as we know)
    validators: dict[str, dict[str, str]] = field(default_factory=dict)  # url -> etag/last_modified
    done: list[list[int]] = field(default_factory=list)
    algorithm: str | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": STATE_VERSION,
                "urls": self.urls,
                "size": self.size,
                "ranges": self.ranges,
                "validators": self.validators,
                "done": self.done,
                "algorithm": self.algorithm,
                "saved": time.time(),
            },
            indent=1,
        )


def load_state(path: Path) -> TransferState | None:
    """Read a state file; ``None`` when missing or unusable (then start over).

    Raises:
        UnsafePathError: a link, FIFO or another user's file is there (never opened blocking).
    """
    from prefetch.safefs import read_bytes

    try:
        raw = read_bytes(path)
        if raw is None:
            return None
        data = json.loads(raw.decode("utf-8"))
        if data.get("version") != STATE_VERSION:
            return None
        done = [[int(a), int(b)] for a, b in data.get("done", [])]
        size = data.get("size")
        if size is not None:
            size = int(size)
            if any(a < 0 or b > size or a >= b for a, b in done):
                return None
        validators = {
            str(url): {str(k): str(v) for k, v in (vals or {}).items()}
            for url, vals in dict(data.get("validators", {})).items()
        }
        return TransferState(
            urls=[str(u) for u in data["urls"]],
            size=size,
            ranges=bool(data.get("ranges", True)),
            validators=validators,
            done=done,
            algorithm=data.get("algorithm"),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def save_state(path: Path, state: TransferState) -> None:
    """Write the state atomically (temp file + rename)."""
    try:
        replace_file(path, state.to_json().encode("utf-8"), checked=True)
    except OSError as exc:
        raise local_error(exc, path) from None


def read_progress(part: Path, state_file: Path) -> tuple[int, int | None] | None:
    """(bytes on disk, size) of an in-flight download, or None when there is none."""
    from prefetch.safefs import check_replaceable

    state = load_state(state_file)
    if state is None or check_replaceable(part) is None:
        return None
    return RangeSet(state.done).total(), state.size


def usable_state(state: TransferState | None, part: Path, urls: list[str]) -> bool:
    """Whether a saved record fits this download and the ``.part`` on disk."""
    from prefetch.safefs import check_replaceable

    part_st = check_replaceable(part)  # a planted link/FIFO/foreign file: UnsafePathError
    if state is None or state.size is None or part_st is None:
        return False
    done = RangeSet(state.done)
    on_disk = part_st.st_size
    return (
        any(u in state.urls for u in urls)
        and (state.ranges or done.covers(state.size))
        and all(b <= on_disk for _, b in done.as_list())
    )
