"""The resume record beside ``<final>.part``: ``<final>.part.json``.

The record holds the file's size, whether the server honours Range, each source's
validator (ETag / Last-Modified) and the byte ranges that are really on disk; a
process killed at any point resumes from it with at most the bytes in flight lost.
It names its sources by ``net/urls.bare_link`` (no ``user:password@``, no signature or token:
the folder may be shared) and fits a download from a link with the same ``link_key``.
Anything unexpected in it (another version, wrong types, ranges outside the file)
makes it unusable: the download starts over rather than trust it.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import field
from pathlib import Path

from prefetch.errors import OPEN_FILES_ERRNOS, too_many_open_files
from prefetch.model.lean import dataclass
from prefetch.fs.files import local_error, replace_file
from prefetch.engine.ranges import RangeSet

STATE_VERSION = 1
# A file at most this big that is complete before its first state save gets no state file:
# a crash before its rename re-sends at most this many bytes (what a resume would bound anyway).
SMALL_FILE = 1 << 20


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
        import json  # (here: a small file, done before its first save, never writes a record)

        from prefetch.net.urls import bare_link  # (beside the file, readable by whoever reads the
        # folder: each link without its password or signature; usable_state matches them by link_key)

        return json.dumps(
            {
                "version": STATE_VERSION,
                "urls": [bare_link(u) for u in self.urls],
                "size": self.size,
                "ranges": self.ranges,
                "validators": {bare_link(u): v for u, v in self.validators.items()},
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
    return check_state(path)[0]


def check_state(path: Path) -> tuple[TransferState | None, str | None]:
    """Read a state file: (state, None), (None, None) when there is none, or (None, why it is unusable).

    Every field is type-checked: a hand-edited or damaged record (``"size": true``,
    a string where a number belongs, ranges outside the file) is refused whole.

    Raises:
        UnsafePathError: a link, FIFO or another user's file is there (never opened blocking).
    """
    from prefetch.fs.safefs import read_bytes

    try:
        raw = read_bytes(path)
        if raw is None:
            return None, None
        text = raw.decode("utf-8")
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        if isinstance(exc, OSError) and exc.errno in OPEN_FILES_ERRNOS:  # the process's limit, not the record:
            raise too_many_open_files(str(path)) from None  # ... "starting over" would drop its progress
        return None, f"cannot read it ({exc})"
    import json

    try:
        data = json.loads(text)
    except ValueError:
        return None, "it is not valid JSON"
    try:
        return _parse_state(data), None
    except _BadState as exc:
        return None, str(exc)


class _BadState(Exception):
    pass


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _parse_state(data) -> TransferState:
    def need(ok: bool, what: str) -> None:
        if not ok:
            raise _BadState(what)

    need(isinstance(data, dict), "it is not a JSON object")
    need(data.get("version") == STATE_VERSION and _is_int(data.get("version")),
         f"version {data.get('version')!r} is not {STATE_VERSION}")
    urls = data.get("urls")
    need(isinstance(urls, list) and all(isinstance(u, str) for u in urls), "urls is not a list of strings")
    size = data.get("size")
    need(size is None or (_is_int(size) and size >= 0), f"size {size!r} is not a byte count")
    done = data.get("done", [])
    need(isinstance(done, list) and all(isinstance(r, list) and len(r) == 2 and all(_is_int(x) for x in r)
                                        for r in done), "done is not a list of [start, end] byte offsets")
    if done:
        need(size is not None, "done ranges without a size")
        need(all(0 <= a < b <= size for a, b in done), "a done range lies outside the file")
    ranges = data.get("ranges", True)
    need(isinstance(ranges, bool), f"ranges {ranges!r} is not true or false")
    validators = data.get("validators", {})
    need(isinstance(validators, dict) and all(
        isinstance(v, dict) and all(k in ("etag", "last_modified") and isinstance(x, str) for k, x in v.items())
        for v in validators.values()), "validators are not strings per URL")
    algorithm = data.get("algorithm")
    need(algorithm is None or algorithm in ("sha256", "md5", "sha1", "sha512"), f"algorithm {algorithm!r} is unknown")
    return TransferState(
        urls=list(urls),
        size=size,
        ranges=ranges,
        validators={url: dict(vals) for url, vals in validators.items()},
        done=[[a, b] for a, b in done],
        algorithm=algorithm,
    )


def save_state(path: Path, state: TransferState) -> None:
    """Write the state atomically (temp file + rename); on a full disk, over the old record's own
    bytes when it fits there (``overwrite_in_place``): a preallocated ``.part`` has its room, the
    download goes on."""
    text = state.to_json()
    try:
        replace_file(path, text.encode("utf-8"), checked=True)
    except OSError as exc:
        import errno
        import json

        from prefetch.fs.files import overwrite_in_place

        if exc.errno in (errno.ENOSPC, errno.EDQUOT) and overwrite_in_place(
                path, json.dumps(json.loads(text), separators=(",", ":")).encode("utf-8")):
            return
        raise local_error(exc, path) from None


class StateSaver:
    """Writes a transfer's resume record, flushing the ``.part`` first when it names new bytes.

    A range recorded as done must be on disk even after a machine reset: the bytes of a
    snapshot were written before it was taken, so ``fdatasync`` before the record that
    names them. :meth:`save_soon` does it on a thread of its own (the transfer's main loop
    never waits for the disk; a save still flushing makes the next one wait its turn).

    With ``small_record=False`` (``TransferOptions.small_record``), a small file
    (``SMALL_FILE``) that is complete before any record was written gets none: its ``.part``
    is still flushed (the caller renames it to its final name next), and a crash before
    that rename costs at most its size again.
    """

    def __init__(self, path: Path, part: Path, *, sync: bool, on_error) -> None:
        self.path, self.part, self.sync, self.on_error = path, part, sync, on_error
        self.written = False  # a record was written by this saver
        self.synced = 0  # bytes done at the last fdatasync
        self.sync_seconds = 0.0  # time spent in fdatasync
        self.thread: threading.Thread | None = None

    def save(self, snapshot, *, small_record: bool = True) -> None:
        """Save ``(state, bytes done, fd)`` now (None: nothing to save)."""
        if snapshot is None:
            return
        state, done, fd = snapshot
        if done > self.synced and fd is not None and self.sync:
            began = time.monotonic()
            try:
                os.fdatasync(fd)
            except OSError as exc:
                raise local_error(exc, self.part) from None
            self.sync_seconds += time.monotonic() - began
            self.synced = done
        if (not small_record and not self.written and state.size is not None and done >= state.size
                and state.size <= SMALL_FILE):
            return  # complete and small: no record needed (see the class docstring)
        save_state(self.path, state)
        self.written = True

    def save_soon(self, take_snapshot) -> None:
        """Save ``take_snapshot()`` on the saver thread, unless a save is still running."""
        if self.thread is not None and self.thread.is_alive():
            return
        self.thread = threading.Thread(target=self._save_quietly, args=(take_snapshot,), daemon=True,
                                       name=f"prefetch-save-{self.path.name}")
        self.thread.start()

    def _save_quietly(self, take_snapshot) -> None:
        try:
            self.save(take_snapshot())
        except BaseException as exc:  # noqa: BLE001 - handed to the transfer's main thread
            self.on_error(exc)

    def join(self) -> None:
        """Wait for a save in flight (before a truncation or the final save)."""
        if self.thread is not None:
            self.thread.join()
            self.thread = None


def read_progress(part: Path, state_file: Path) -> tuple[int, int | None] | None:
    """(bytes on disk, size) of an in-flight download, or None when there is none."""
    from prefetch.fs.safefs import check_replaceable

    state = load_state(state_file)
    if state is None or check_replaceable(part) is None:
        return None
    return RangeSet(state.done).total(), state.size


def usable_state(state: TransferState | None, part: Path, urls: list[str]) -> bool:
    """Whether a saved record fits this download and the ``.part`` on disk: one of ``urls`` is one
    of its links (``net/urls.link_key``: a presigned link signed again is the same link; its
    validators still guard the resumed bytes, ``same_link_validators``)."""
    from prefetch.fs.safefs import check_replaceable

    part_st = check_replaceable(part)  # a planted link/FIFO/foreign file: UnsafePathError
    if state is None or state.size is None or part_st is None:
        return False
    done = RangeSet(state.done)
    on_disk = part_st.st_size
    return (
        _same_link(state.urls, urls)
        and (state.ranges or done.covers(state.size))
        and all(b <= on_disk for _, b in done.as_list())
    )


def _same_link(saved: list[str], urls: list[str]) -> bool:
    if any(u in saved for u in urls):
        return True
    from prefetch.net.urls import link_key

    keys = {link_key(u) for u in saved}
    return any(link_key(u) in keys for u in urls)


def same_link_validators(validators: dict[str, dict[str, str]], urls: list[str]) -> dict[str, dict[str, str]]:
    """``validators`` (a resume record's, by the URL it saved) for ``urls``: a URL's own, else
    those saved for its link signed otherwise (``link_key``), so a resumed request still asks
    ``If-Range`` with the ETag the kept bytes came with."""
    missing = [u for u in urls if u not in validators]
    if not missing or not validators:
        return validators
    from prefetch.net.urls import link_key

    by_key = {link_key(u): v for u, v in validators.items()}
    return {**{u: by_key[link_key(u)] for u in missing if link_key(u) in by_key}, **validators}
