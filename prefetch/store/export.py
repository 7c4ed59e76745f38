"""``prefetch export DIR``: the flat dataset-mirror layout for nginx or any static host.

``DIR/<origin file name>`` for every verified file in the local cache (hard links when
the filesystem allows, else copies; each appears atomically), plus ``DIR/SHA256SUMS``
in ``sha256sum -c`` format. Serve DIR and point ``--mirror`` at it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from prefetch.errors import HashMismatchError, LocalFileError, NotDownloadedError
from prefetch.fs.files import local_error


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
    from prefetch.store.push import file_digests

    directory = Path(directory).expanduser().absolute()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise local_error(exc, directory) from None
    report = ExportReport(directory=str(directory))
    chosen = names or sorted(registry.datasets)
    sums: dict[str, str] = _read_sums(directory / "SHA256SUMS")
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
            expected = plan.spec.expected
            if expected is not None and not expected.matches(sha256 if expected.algorithm == "sha256" else md5):
                raise HashMismatchError(f"{plan.final} does not match its {expected.algorithm}; not exported "
                                        f"(`prefetch get {spec.name}` replaces it)")
            how = _place(plan.final, directory / plan.spec.name, sha256, sums.get(plan.spec.name))
            sums[plan.spec.name] = sha256
            report.files.append({"name": plan.spec.name, "size": size, "sha256": sha256, "how": how})
    _write_sums(directory / "SHA256SUMS", sums)
    return report


def _place(source: Path, target: Path, sha256: str, listed: str | None) -> str:
    if target.is_file() and not target.is_symlink() and listed == sha256:
        try:
            if os.path.samefile(source, target) or target.stat().st_size == source.stat().st_size:
                return "kept"
        except OSError:
            pass
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.unlink(missing_ok=True)
        try:
            os.link(source, tmp)
            how = "linked"
        except OSError:
            import shutil

            shutil.copyfile(source, tmp)
            how = "copied"
        os.replace(tmp, target)  # replaces a link or file at the name, never writes through it
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LocalFileError(f"cannot write {target}: {exc.strerror or exc}") from None
    return how


def _read_sums(path: Path) -> dict[str, str]:
    sums = {}
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            digest, _, name = line.partition("  ")
            if len(digest) == 64 and name:
                sums[name] = digest
    except OSError:
        pass
    return sums


def _write_sums(path: Path, sums: dict[str, str]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text("".join(f"{d}  {n}\n" for n, d in sorted(sums.items())), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise local_error(exc, path) from None
