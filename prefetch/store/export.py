"""``prefetch export DIR``: the flat dataset-mirror layout for nginx or any static host.

``DIR/<origin file name>`` for every verified file in the local cache (hard links when
the filesystem allows, else copies; each appears atomically), plus ``DIR/SHA256SUMS``
in ``sha256sum -c`` format. Serve DIR and point ``--mirror`` at it.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from prefetch.errors import HashMismatchError, LocalFileError, NotDownloadedError
from prefetch.fs import safefs
from prefetch.fs.files import local_error, remove_dead_temps, replace_file, sync_dir, temp_name
from prefetch.fs.paths import expand_path


@dataclass
class ExportReport:
    """What went into the directory."""

    directory: str
    files: list[dict] = field(default_factory=list)  # name, size, sha256, how (linked|copied|kept)
    skipped: list[str] = field(default_factory=list)  # datasets not (completely) cached


def export_cache(directory: Path, *, registry, root: Path, names: list[str] | None = None) -> ExportReport:
    """Export the cached, verified files of ``names`` (default: every complete dataset).

    Raises:
        NotDownloadedError: a named dataset is not completely cached.
        HashMismatchError: a cached file no longer matches its hash.
        LocalFileError: DIR cannot be written.
    """
    from prefetch.cache.plans import plan_files
    from prefetch.fs.hashing import digest_mismatch
    from prefetch.store.push import file_digests

    directory = expand_path(directory, "DIRECTORY").absolute()
    try:
        safefs.make_dirs(directory)  # a folder link another user planted, here or above, is never followed
    except OSError as exc:
        raise local_error(exc, directory) from None
    report = ExportReport(directory=str(directory))
    chosen = names or sorted(registry.datasets)
    sums = _read_sums(directory / "SHA256SUMS")
    for name in chosen:
        spec = registry.get(name)
        plans = plan_files(spec, root=root)
        if not all(p.final.is_file() for p in plans):
            if names:
                raise NotDownloadedError(f"{spec.name} is not (completely) in the cache; `prefetch get {spec.name}` first")
            report.skipped.append(spec.name)
            continue
        for plan in plans:
            sha256, md5, size = file_digests(plan.final)
            wrong = digest_mismatch({"sha256": sha256, "md5": md5}, plan.spec.hashes)
            if wrong is not None:
                raise HashMismatchError(f"{plan.final} does not match its {wrong[0].algorithm}; not exported "
                                        f"(`prefetch get {spec.name}` replaces it)")
            how = _place(plan.final, directory / plan.spec.name, sha256, sums.get(plan.spec.name))
            sums[plan.spec.name] = sha256
            report.files.append({"name": plan.spec.name, "size": size, "sha256": sha256, "how": how})
    remove_dead_temps(directory / "SHA256SUMS")
    _write_sums(directory / "SHA256SUMS", sums)
    sync_dir(directory)  # the renames above, on disk
    return report


def _place(source: Path, target: Path, sha256: str, listed: str | None, *, link: bool = True) -> str:
    """``source`` at ``target``: kept, hard-linked or copied; never through a link another user planted.

    DIR may be shared (a team's static mirror): a link or another user's file at a name
    prefetch writes is refused (``UnsafePathError``, exit 5), and temp files are created
    with ``O_EXCL | O_NOFOLLOW`` under unpredictable names. ``link=False``: always a copy,
    and a hard link an earlier export made is replaced by one (nltk 3.10 refuses to open a
    data file that has a second name).
    """
    st = safefs.check_replaceable(target)  # a planted link or another user's file: refused
    if st is not None:
        try:
            # The cache file itself (a link an earlier export made, listed or not: one killed before
            # SHA256SUMS), or a copy SHA256SUMS vouches for and the bytes confirm. (A rename of a
            # second link over the first would do nothing and leave the temp name behind.)
            same = os.path.samefile(source, target)
            if (same and link) or (not same and listed == sha256 and st.st_size == source.stat().st_size
                                   and file_sha256(target) == sha256):
                return "kept"
        except OSError:
            pass
    remove_dead_temps(target)  # an export killed before its rename left a copy (or link) of it there
    tmp = temp_name(target)
    try:
        try:
            if not link:
                raise OSError("a copy, not a second name")
            os.link(source, tmp)  # creates the name: never follows anything at it
            how = "linked"
        except OSError:
            fd = safefs.open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
                shutil.copyfileobj(src, out, 1 << 20)
                out.flush()
                os.fsync(out.fileno())  # on disk before its name is: a crash never leaves a short file at the name
            how = "copied"
        safefs.replace(tmp, target)
    except OSError as exc:
        safefs.discard_own(tmp)
        raise LocalFileError(f"cannot write {target}: {exc.strerror or exc}") from None
    except BaseException:
        safefs.discard_own(tmp)
        raise
    return how



def file_sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    fd = safefs.open_file(path, own=False)
    with os.fdopen(fd, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_sums(path: Path) -> dict[str, str | None]:
    """The name -> sha256 lines of an existing SHA256SUMS, in each form ``sha256sum -c`` reads:
    ``HASH  NAME``, ``HASH *NAME`` (``-b``), ``SHA256 (NAME) = HASH`` (``--tag``), any case, and
    ``\\``-escaped names. A line of another form is kept as it is (``None`` value, keyed by the line)."""
    sums: dict[str, str | None] = {}
    try:
        data = safefs.read_bytes(path, own=False)  # never a FIFO, never through a planted link
    except (OSError, LocalFileError):
        data = None
    for line in (data or b"").decode("utf-8", "surrogateescape").split("\n"):
        line = line[:-1] if line.endswith("\r") else line
        escaped = line.startswith("\\")
        body = line[1:] if escaped else line
        found = _GNU_LINE.match(body) or _BSD_LINE.match(body)
        if found is None:
            if line.strip():
                sums[line] = None
            continue
        name = found.group("name")
        if escaped:
            name = re.sub(r"\\(.)", lambda m: _UNESCAPE.get(m.group(1), m.group(0)), name)
        sums[name] = found.group("hex").lower()
    return sums


def _write_sums(path: Path, sums: dict[str, str | None]) -> None:
    lines = [line for line, digest in sums.items() if digest is None]  # not ours to judge: kept
    for name, digest in sorted((n, d) for n, d in sums.items() if d is not None):
        if any(c in name for c in "\\\n\r"):  # as sha256sum writes such a name
            name = name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
            digest = "\\" + digest
        lines.append(f"{digest}  {name}")
    data = "".join(f"{line}\n" for line in lines).encode("utf-8", "surrogateescape")
    try:  # a planted link or another user's SHA256SUMS: refused, never written through
        replace_file(path, data, checked=True, durable=True)
    except OSError as exc:
        raise local_error(exc, path) from None


_GNU_LINE = re.compile(r"^(?P<hex>[0-9A-Fa-f]{64}) [ *](?P<name>.+)$")
_UNESCAPE = {"n": "\n", "r": "\r", "\\": "\\"}
_BSD_LINE = re.compile(r"^SHA256 \((?P<name>.+)\) = (?P<hex>[0-9A-Fa-f]{64})$")
