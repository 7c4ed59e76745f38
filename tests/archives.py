"""Building test archives in code (a helper module, not tests)."""

from __future__ import annotations

import io
import tarfile


def tar_gz(members: dict[str, bytes], *, folder: str | None = None) -> bytes:
    """A .tar.gz of ``members`` (name -> bytes), optionally all under a ``folder`` entry."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        if folder is not None:
            dir_info = tarfile.TarInfo(folder)
            dir_info.type = tarfile.DIRTYPE
            dir_info.mode = 0o755
            tar.addfile(dir_info)
        for name, data in members.items():
            info = tarfile.TarInfo(f"{folder}/{name}" if folder is not None else name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
