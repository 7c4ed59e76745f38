"""``prefetch list``, ``verify`` and ``rm`` of ``nltk:ID``: NLTK packages in NLTK's data dir.

A package is ``<data dir>/<subdir>/<id>.zip`` and, unzipped, ``<subdir>/<id>/``. Its subdir
is the built-in snapshot's, or, for an id the snapshot lacks (a mirror's or a team's own
package), wherever its zip or folder lies. A collection of the snapshot names its members.

``verify`` re-hashes the zip against the hash it was placed with (prefetch's completion
record: the hash of the index it came from), else the snapshot's entry; without either it
is ``unchecked``. An unzipped folder that should be there and is not is ``missing``.
``rm`` removes the zip, the folder, partials and prefetch's records of them; a package being
downloaded right now is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from prefetch.cache import nltk_data
from prefetch.cache.layout import part_path, state_path
from prefetch.cache.placement import completion_path, marker_path, read_completion
from prefetch.model.plans import VerifyResult
from prefetch.model.specs import ExpectedHash
from prefetch.operations.listing import _verify_one
from prefetch.operations.removal import RemoveResult, remove_unless_busy


def _packages(ident: str, data_dir: Path) -> list[tuple[str, Path, nltk_data.NltkPackage | None]]:
    """(id, zip path, snapshot entry or None) of each package ``ident`` names."""
    snapshot = nltk_data.load_snapshot()
    if ident in snapshot.collections:
        return [(p.id, data_dir.joinpath(*p.path.split("/")), p) for p in snapshot.expand([ident])]
    known = snapshot.packages.get(ident)
    if known is not None:
        return [(ident, data_dir.joinpath(*known.path.split("/")), known)]
    found = sorted(data_dir.glob(f"*/{ident}.zip")) + sorted(data_dir.glob(f"*/*/{ident}.zip"))
    if not found:
        found = [p.with_name(f"{ident}.zip") for p in sorted(data_dir.glob(f"*/{ident}")) if p.is_dir()]
    return [(ident, path, None) for path in found] or [(ident, data_dir / "*" / f"{ident}.zip", None)]


def _recorded(state: Path, final: Path) -> ExpectedHash | None:
    """The hash prefetch placed ``final`` with, from its completion record."""
    record = read_completion(state / "placed", final)
    if record is None or record.get("path") != str(final.absolute()):
        return None
    algorithm, digest = record.get("algorithm"), record.get("digest")
    if algorithm in ("md5", "sha256") and isinstance(digest, str) and digest:
        return ExpectedHash(algorithm, digest.lower())
    return None


def verify_nltk(name: str, *, env: Mapping[str, str], state: Path) -> list[VerifyResult]:
    """One result per zip (and per unzipped folder that is missing) of ``nltk:ID``.

    Raises:
        UsageError: a malformed id.
    """
    ident = nltk_data.parse_nltk_name(name)
    data_dir = nltk_data.nltk_data_dir(env).absolute()
    results = []
    for pkg_id, final, known in _packages(ident, data_dir):
        expected = _recorded(state, final)
        if expected is None and known is not None:
            expected = ExpectedHash(*known.expected)
        results.append(_verify_one(final, expected))
        folder = final.with_name(pkg_id)
        if final.exists() and (known.unzip if known is not None else True) and not folder.is_dir():
            if known is not None or _is_unzipped_package(final):
                results.append(VerifyResult(str(folder), "missing", None, None, None))
    return results


def _is_unzipped_package(final: Path) -> bool:
    """A package of unknown kind: expected unzipped when its zip holds a ``<id>/`` folder."""
    import zipfile

    try:
        with zipfile.ZipFile(final) as zf:
            return any(n.startswith(final.stem + "/") for n in zf.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def remove_nltk(names: list[str], result: RemoveResult, *, env: Mapping[str, str], state: Path,
                dry_run: bool) -> None:
    """Add to ``result`` what removing ``nltk:`` names removes (nothing for what is not there)."""
    data_dir = nltk_data.nltk_data_dir(env).absolute()
    for name in names:
        for pkg_id, final, _known in _packages(nltk_data.parse_nltk_name(name), data_dir):
            paths = [(final, "file"), (final.with_name(pkg_id), "extracted"), (part_path(final), "partial"),
                     (state_path(final), "state"), (completion_path(state / "placed", final), "record"),
                     (marker_path(state / "extracted", final, final.parent), "marker")]
            paths = [(p, what) for p, what in paths if p.exists() or p.is_symlink()]
            if paths:
                remove_unless_busy(paths, final, result, locks=state / "locks", dry_run=dry_run)


@dataclass
class NltkPackageState:
    """One package in NLTK's data dir, as ``prefetch list`` shows it."""

    name: str  # nltk:ID
    path: str  # its zip
    state: str  # complete | partial | missing | zip only (its folder is gone) | unverified (size differs, not ours)
    bytes: int = 0  # the zip and its in-flight part
    partial: int = 0


def list_nltk(names: list[str], *, env: Mapping[str, str], state: Path) -> tuple[Path, list[NltkPackageState]]:
    """(data dir, rows): the packages ``names`` name (collections expanded), or with no names every
    package whose zip or partial is in the data dir. ``complete``: the zip is there, placed by
    prefetch (its completion record) or at the size the snapshot gives (any size for an id the
    snapshot lacks), and, for a package that is unzipped, its folder too; ``verify`` re-hashes it."""
    data_dir = nltk_data.nltk_data_dir(env).absolute()
    if names:
        wanted = [p for n in names for p in _packages(nltk_data.parse_nltk_name(n), data_dir)]
    else:
        found = {}
        for pattern in ("*/*.zip", "*/*.zip.part"):
            for path in sorted(data_dir.glob(pattern)):
                zip_path = path if path.suffix == ".zip" else path.with_suffix("")
                found.setdefault(zip_path, zip_path.stem)
        snapshot = nltk_data.load_snapshot()
        wanted = [(pkg_id, final, snapshot.packages.get(pkg_id)) for final, pkg_id in found.items()]
    rows = []
    seen = set()
    for pkg_id, final, known in wanted:
        if final in seen:
            continue
        seen.add(final)
        rows.append(_package_state(pkg_id, final, known, ours=_recorded(state, final) is not None))
    return data_dir, rows


def _package_state(pkg_id: str, final: Path, known, *, ours: bool) -> NltkPackageState:
    def size(path: Path) -> int | None:
        try:
            return path.stat().st_size if path.is_file() and not path.is_symlink() else None
        except OSError:
            return None

    zip_size, part_size = size(final), size(part_path(final))
    row = NltkPackageState(name=f"nltk:{pkg_id}", path=str(final), state="missing",
                           bytes=(zip_size or 0) + (part_size or 0), partial=part_size or 0)
    if zip_size is not None and (ours or known is None or zip_size == known.size):
        unzip = known.unzip if known is not None else _is_unzipped_package(final)
        row.state = "complete" if not unzip or final.with_name(pkg_id).is_dir() else "zip only"
    elif zip_size is not None:
        row.state = "unverified"
    elif part_size is not None:
        row.state = "partial"
    return row
