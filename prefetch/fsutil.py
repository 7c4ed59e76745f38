"""Small filesystem helpers shared by every module that writes files."""

from __future__ import annotations

import os
from pathlib import Path


def replace_file(path: Path, data: bytes, *, durable: bool = False, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` in one step: a temp file beside it, then ``os.replace``.

    Readers see the old content or the new, never a half-written file.

    Args:
        durable: fsync the data before the rename (records that must survive a crash).
        mode: permission bits for the new file (default: the umask's).
    Raises:
        OSError: the temp file could not be written or renamed (it is removed).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
