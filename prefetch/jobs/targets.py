"""A ``-b`` job's folders, checked before it starts: one the job could never write (Kaggle's
read-only ``/kaggle/input`` given as ``-P``) is refused in the cell that starts it, with the
line a foreground ``get`` gives, instead of a "started job" whose ``wait`` says it later.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


def check_targets_writable(plans) -> None:
    """Each plan's nearest existing folder can be written, unless its file is already there.

    One look per folder (a list of 2,000 URLs into one folder: one ``access``), strings only.

    Raises:
        LocalFileError: a read-only filesystem or a folder without write permission (exit 5).
    """
    writable: set[str] = set()
    for plan, final in _targets(plans):
        parent = os.path.dirname(final)
        if parent in writable:
            continue
        folder = parent
        while not os.path.lexists(folder) and folder != os.path.dirname(folder):
            folder = os.path.dirname(folder)
        if not os.path.isdir(folder) or os.access(folder, os.W_OK):
            writable.add(parent)  # (not a folder: the download's own line says what is there)
            continue
        if os.path.lexists(final):
            continue  # (in place already: placing it again may write nothing there)
        try:
            read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        code = errno.EROFS if read_only else errno.EACCES
        from prefetch.fs.files import local_error

        raise local_error(OSError(code, os.strerror(code)), Path(folder))


def _targets(plans):
    """(plan, path) for each path a plan's job writes: its final path, and for a hub repo whose
    final path is prefetch's own record in the state dir (an ``hf://...@COMMIT`` selection's
    manifest, an ``ms://`` repo's completion record), the cache folder its files go to."""
    for plan in plans:
        yield plan, os.fspath(plan.final)
        folder = getattr(plan, "repo_dir", None) or getattr(plan, "snapshot", None)
        if folder is not None:
            yield plan, os.fspath(folder)
