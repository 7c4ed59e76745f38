"""One gzip- or xz-compressed file (not a tar) decompressed into one file beside it, complete or absent.

torchvision's MNIST family keeps ``train-images-idx3-ubyte.gz`` and the decompressed
``train-images-idx3-ubyte`` side by side, and checks only that the latter exists: it
must never be half-written. The bytes go to an exclusive temp name (never through a
planted link) and are renamed into place once gzip's own CRC and length checks passed.
"""

from __future__ import annotations

import gzip
import lzma
import os
import zlib
from pathlib import Path

from prefetch.errors import DiskFullError, IntegrityError, InterruptedTransferError, UnsafeArchiveError
from prefetch.fs import safefs
from prefetch.fs.files import free_space, local_error, mib

_CHUNK = 1 << 20


def decompress_gzip(source: Path, target: Path, *, max_ratio: float = 200.0, durable: bool = False,
                    stop=None) -> int:
    """Decompress the gzip (or xz) file ``source`` into ``target``; the number of bytes written.

    ``stop`` (a ``threading.Event``: Ctrl-C, SIGTERM, `prefetch cancel`) is checked before each
    MiB, as an archive's extraction checks it: once set, the temp file is removed and nothing
    is placed.

    Raises:
        IntegrityError: ``source`` is not gzip, or is corrupt or truncated.
        UnsafeArchiveError: it expands more than ``max_ratio`` times (a decompression bomb).
        InterruptedTransferError: ``stop`` was set; ``target`` was not placed.
        DiskFullError: it expands to more than the free space (checked while writing, so the
            disk is never filled). LocalFileError / UnsafePathError: ``target`` cannot be written.
    """
    source, target = Path(source), Path(target)
    safefs.check_dir_chain(target.parent)
    safefs.check_replaceable(target)
    fd = safefs.open_file(source, os.O_RDONLY, own=False)
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    written = 0
    try:
        with os.fdopen(fd, "rb") as raw:
            limit = max(1 << 20, int(os.fstat(raw.fileno()).st_size * max_ratio))
            room = free_space(target.parent)  # stop before the disk is full, not when it is
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
            xz = raw.read(6) == b"\xfd7zXZ\x00"
            raw.seek(0)
            src = lzma.LZMAFile(raw, mode="rb") if xz else gzip.GzipFile(fileobj=raw, mode="rb")
            with os.fdopen(out, "wb") as dst, src:
                while True:
                    if stop is not None and stop.is_set():
                        raise InterruptedTransferError(f"decompressing {source} stopped; nothing of it was placed")
                    chunk = src.read(_CHUNK)
                    if not chunk:
                        break
                    written += len(chunk)
                    if written > limit:
                        raise UnsafeArchiveError(
                            f"{source}: decompresses to more than {limit} bytes ({max_ratio:g} times its size); "
                            "not placed")
                    if written > room:
                        raise DiskFullError(
                            f"no space left on the device holding {target}: {source.name} decompresses to more "
                            f"than the {mib(room)} free; free some space (or use --cache-dir) and run the command again")
                    dst.write(chunk)
                if durable:  # on disk before its name is: a crash never leaves a short file there
                    dst.flush()
                    os.fdatasync(dst.fileno())
        safefs.replace(tmp, target)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        safefs.remove_own(tmp)
        if isinstance(exc, (EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile)):
            raise IntegrityError(f"{source}: not a complete gzip/xz file ({exc}); {target} not placed") from None
        raise local_error(exc, target) from None
    except BaseException:
        safefs.remove_own(tmp)
        raise
    return written
