"""Archive format detection by content, decompressors, and the errors archive reading raises."""

from __future__ import annotations

import errno
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from prefetch.errors import DiskFullError, IntegrityError, LocalFileError, PrefetchError

_PEEK = 1024
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
_GZIP_MAGIC = b"\x1f\x8b"
_XZ_MAGIC = b"\xfd7zXZ\x00"


@dataclass(frozen=True)
class _Sniffed:
    format: str | None  # "tar" | "zip" | None
    compression: str  # "" | "gz" | "bz2" | "xz"
    why: str  # when format is None: what we saw


def _open_archive(path: Path):
    try:
        return open(path, "rb")
    except FileNotFoundError as exc:
        raise LocalFileError(f"archive {path} does not exist; download it first") from exc
    except OSError as exc:
        raise LocalFileError(f"cannot open archive {path}: {exc.strerror or exc}") from exc


def _sniff(raw) -> _Sniffed:
    head = _read_raw(raw, _PEEK)
    raw.seek(0)
    if head.startswith(_ZIP_MAGICS):
        return _Sniffed("zip", "", "")
    if head.startswith(_GZIP_MAGIC):
        compression = "gz"
    elif head[:3] == b"BZh" and head[3:4] in b"123456789" and len(head) > 3:
        compression = "bz2"
    elif head.startswith(_XZ_MAGIC):
        compression = "xz"
    else:
        compression = ""
    if compression:
        try:
            inner = _open_decompressor(raw, compression)
            try:
                block = inner.read(_PEEK)
            finally:
                inner.close()
        except _DECOMPRESSION_ERRORS as exc:
            if isinstance(exc, OSError) and exc.errno is not None:
                raise LocalFileError(f"cannot read archive: {exc.strerror}") from exc
            return _Sniffed(
                None, compression, f"is {compression}-compressed but cannot be decompressed ({exc})"
            )
        finally:
            raw.seek(0)
        if _looks_like_tar(block):
            return _Sniffed("tar", compression, "")
        return _Sniffed(None, compression, f"is {compression}-compressed but does not contain a tar archive")
    if _looks_like_tar(head):
        return _Sniffed("tar", "", "")
    if not head:
        return _Sniffed(None, "", "is empty")
    return _Sniffed(None, "", f"starts with bytes {head[:8].hex(' ')}, which match no tar or zip format")


def _read_raw(raw, size: int) -> bytes:
    try:
        return raw.read(size)
    except OSError as exc:
        raise LocalFileError(
            f"cannot read archive {getattr(raw, 'name', '')}: {exc.strerror or exc}"
        ) from exc


def _looks_like_tar(block: bytes) -> bool:
    if len(block) < tarfile.BLOCKSIZE:
        return False
    if block[: 2 * tarfile.BLOCKSIZE] == bytes(2 * tarfile.BLOCKSIZE):
        return True  # an empty archive: just the end-of-archive marker
    try:
        tarfile.TarInfo.frombuf(block[: tarfile.BLOCKSIZE], "utf-8", "surrogateescape")
    except tarfile.HeaderError:
        return False
    return True


def _check_format(archive: Path, sniffed: _Sniffed, wanted: str) -> None:
    if sniffed.format is None:
        raise IntegrityError(
            f"{archive} is not a tar or zip archive: it {sniffed.why}; it may be truncated or an "
            "error page saved in its place. Delete it and download it again."
        )
    if wanted != "auto" and wanted != sniffed.format:
        raise IntegrityError(
            f"{archive} was expected to be a {wanted} archive but its content is a {sniffed.format} "
            "archive; check the registry entry or download it again."
        )


def _open_decompressor(raw, compression: str):
    if compression == "gz":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")
    if compression == "bz2":
        import bz2

        return bz2.BZ2File(raw, mode="rb")
    if compression == "xz":
        import lzma

        return lzma.LZMAFile(raw, mode="rb")
    return raw


def _decompression_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError, EOFError, zlib.error]
    try:
        import lzma

        errors.append(lzma.LZMAError)
    except ImportError:  # pragma: no cover - Python built without lzma
        pass
    return tuple(errors)


_DECOMPRESSION_ERRORS = _decompression_errors()


# -- errors ----------------------------------------------------------------------
def _corrupt(archive: Path, exc: BaseException, *, member: str | None = None) -> IntegrityError:
    where = f" (at member {member!r})" if member else ""
    return IntegrityError(
        f"archive {archive} is corrupt or truncated{where}: {exc or type(exc).__name__}. "
        "Nothing was extracted; delete it and download it again."
    )


def _read_error(archive: Path, exc: BaseException, *, member: str | None = None) -> PrefetchError:
    if isinstance(exc, OSError) and exc.errno is not None:
        return LocalFileError(f"cannot read archive {archive}: {exc.strerror}")
    return _corrupt(archive, exc, member=member)


def _filesystem_error(exc: OSError, *, archive: Path, destination: Path) -> PrefetchError:
    where = f" ({_short(str(exc.filename))})" if exc.filename else ""
    if exc.errno == errno.ENAMETOOLONG:  # (a member's path of thousands of bytes: not all of it in the line)
        return LocalFileError(f"cannot extract {archive} into {destination}{where}: a member's name or path is "
                              f"longer than this filesystem allows; nothing was extracted")
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return DiskFullError(
            f"no space left while extracting {archive} into {destination}{where}; nothing was "
            "extracted. Free some space and retry."
        )
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return LocalFileError(
            f"permission denied while extracting {archive} into {destination}{where}: "
            f"{exc.strerror}. Make the directory writable or choose another one."
        )
    return LocalFileError(f"cannot extract {archive} into {destination}{where}: {exc.strerror or exc}")


def _short(path: str, keep: int = 80) -> str:
    """``path`` for a one-line message: its start and end when it is long."""
    return path if len(path) <= 2 * keep + 3 else f"{path[:keep]}...{path[-keep:]}"
