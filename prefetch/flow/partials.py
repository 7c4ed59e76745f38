"""What a download leaves before it is placed: its size checked, partials that cannot be resumed dropped."""

from __future__ import annotations

import os
from pathlib import Path

from prefetch.cache import placement
from prefetch.fs.files import local_error
from prefetch.model.events import Event, EventKind, EventSink


def check_size(part: Path, state: Path, size: int, label: str, *, ident: tuple[int, int] | None = None):
    """The file to be placed is the one the transfer wrote (``ident``: its st_dev, st_ino) and has
    exactly the size the transfer verified (no tail of junk); its stat."""
    try:
        st = os.stat(part, follow_symlinks=False)
        actual = st.st_size
    except OSError as exc:
        raise local_error(exc, part) from None
    if ident is not None and (st.st_dev, st.st_ino) != ident:
        from prefetch.errors import LocalFileError

        # Another process put a file at the name while the download wrote into the one it opened:
        # its bytes are not ours to place (nor to delete); our record described the other file.
        placement.discard(state)
        raise LocalFileError(f"{label}: {part} was replaced by another file during the download; not placed. "
                             f"Make sure nothing else writes there, then run the same command again")
    if actual != size:
        from prefetch.errors import IntegrityError

        placement.discard(part, state)
        raise IntegrityError(f"{label}: {part} holds {actual} bytes, the download {size}; not placed. "
                             f"Run the same command again")
    return st


def part_changed(part: Path, now: os.stat_result, written: os.stat_result, label: str):
    """None when the ``.part`` (``now``: its stat) is the file written (``written``: the writer's
    fstat), with the size written; else the error its file fails with (the bulk lane's
    :func:`check_size`): replaced by another file (left alone), or cut or grown (discarded)."""
    from prefetch.errors import LocalFileError

    if (now.st_dev, now.st_ino) != (written.st_dev, written.st_ino):
        return LocalFileError(f"{label}: {part} was replaced by another file during the download; not placed. "
                              f"Make sure nothing else writes there, then run the same command again")
    if now.st_size != written.st_size:
        placement.discard(part)
        return LocalFileError(f"{label}: {part} was truncated or extended by another process during the download "
                              f"({now.st_size} bytes, {written.st_size} written); not placed. Make sure nothing "
                              f"else writes there, then run the same command again")
    return None


def drop_unverifiable_partial(part: Path, state: Path, label: str, on_event: EventSink) -> None:
    """Without an expected hash, resume only bytes that a validator can vouch for.

    ``If-Range`` needs an ETag or a Last-Modified date. A partial download from a
    server that sent neither cannot be checked against the remote file: resuming it
    could stitch two versions together with no hash to catch it (as ``wget -c`` does).
    """
    from prefetch.engine.resume_state import load_state

    saved = load_state(state)
    if saved is None or not saved.done or any(saved.validators.values()):
        return
    placement.discard(part, state)
    on_event(
        Event(
            EventKind.NOTE,
            label,
            message="the partial download has no ETag or Last-Modified to check it against the server "
            "(and no expected hash); starting over",
        )
    )


def drop_empty_partial(part: Path, state: Path) -> None:
    """After a failure with no byte on disk, leave no ``.part`` or state behind: nothing to resume."""
    from prefetch.engine.resume_state import load_state

    saved = load_state(state)
    if saved is None or not saved.done:
        placement.discard(part, state)
