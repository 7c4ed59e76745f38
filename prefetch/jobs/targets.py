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

    Raises:
        LocalFileError: a read-only filesystem or a folder without write permission (exit 5).
    """
    seen: set[Path] = set()
    for plan in plans:
        final = Path(plan.final)
        if os.path.lexists(final):
            continue  # (in place already: placing it again may write nothing there)
        folder = final.parent
        while not os.path.lexists(folder) and folder != folder.parent:
            folder = folder.parent
        if folder in seen:
            continue
        seen.add(folder)
        if os.path.isdir(folder) and not os.access(folder, os.W_OK):
            try:
                read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
            except OSError:
                read_only = False
            code = errno.EROFS if read_only else errno.EACCES
            from prefetch.fs.files import local_error

            raise local_error(OSError(code, os.strerror(code)), folder)
