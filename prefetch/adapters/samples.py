"""The samples of a tar shard, WebDataset style: members ``KEY.EXT`` with the same key form one sample.

Members are read into memory from the verified shard, never written to disk, so
no member name can escape anywhere; links, devices and directories are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def iter_tar_samples(path: str | Path) -> Iterator[dict]:
    """Each sample of the tar at ``path``: ``{"__key__": KEY, "__shard__": path, EXT: bytes, ...}``.

    Samples come in the tar's order; a sample ends where the key changes (as
    WebDataset writes shards: a sample's members next to each other). The key is
    the member name up to the first dot of its last component (``a/b.c.d`` ->
    key ``a/b``, ext ``c.d``).
    """
    import tarfile

    path = str(path)
    current: dict | None = None
    with tarfile.open(path, mode="r|*") as tar:
        for member in tar:
            if not member.isfile():
                continue
            folder, _, base = member.name.rpartition("/")
            stem, dot, ext = base.partition(".")
            key = f"{folder}/{stem}" if folder else stem
            if current is not None and current["__key__"] != key:
                yield current
                current = None
            if current is None:
                current = {"__key__": key, "__shard__": path}
            handle = tar.extractfile(member)
            current[ext if dot else ""] = handle.read() if handle is not None else b""
    if current is not None:
        yield current
