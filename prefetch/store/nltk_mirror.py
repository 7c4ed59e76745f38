"""NLTK data in the team store and in exported folders: the gh-pages layout.

``BASE/index.xml`` and ``BASE/packages/<subdir>/<id>.zip`` (``prefetch.cache.nltk_data``),
where BASE is ``s3://BUCKET/PREFIX`` or a local folder:

* ``read_store_index``: the store's ``index.xml``, for ``prefetch get nltk:ID --mirror s3://...``
  (the packages themselves are read through ``StoreSources`` like any store object);
* ``push_nltk`` (``prefetch push nltk:ID s3://...``) and ``export_nltk`` (``prefetch export
  DIR nltk:ID``): packages from NLTK's data dir into that layout, and ``index.xml``
  merged with what is already there, each entry's size, md5, sha256 and unzipped size
  computed from the zip published, so readers verify exactly those bytes.

A zip is published only when it is known good: prefetch placed it (its completion record
still matches the file) or its bytes match the built-in snapshot's entry. A zip of an id
no index knows is the team's own package and is published as it is. Two pushes of
``index.xml`` at the same moment can lose one's entries (last writer wins): push again.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from prefetch.cache import nltk_data
from prefetch.errors import HashMismatchError, LocalFileError, NetworkError, NotDownloadedError, UsageError
from prefetch.fs.paths import expand_path
from prefetch.store.s3 import error_code, open_store, store_error

INDEX = "index.xml"
INDEX_LIMIT = 16 << 20  # the real index.xml is about 64 kB


def read_store_index(base: str, *, env: Mapping[str, str]) -> nltk_data.NltkIndex:
    """``s3://BUCKET/PREFIX/index.xml``, parsed.

    Raises:
        NetworkError: no index there, or not an index. StoreError, MissingExtraError.
    """
    store = open_store(base, env=env)
    url = store.location.url_for(INDEX)
    data = _get_object(store, INDEX)
    if data is None:
        raise NetworkError(f"the store has no NLTK index at {url}; "
                           f"`prefetch push nltk:ID {store.location.url}` publishes packages and their index there")
    if len(data) > INDEX_LIMIT:
        raise NetworkError(f"{url} is larger than {INDEX_LIMIT >> 20} MB: not an NLTK index")
    return nltk_data.parse_index(data, source=url)


def read_folder_index(folder: Path) -> nltk_data.NltkIndex:
    """``FOLDER/index.xml`` of an exported copy (a NAS mount), parsed.

    Raises:
        NetworkError: no index there, or not an index.
    """
    from prefetch.fs import safefs

    path = folder / INDEX
    try:
        data = safefs.read_bytes(path, own=False, limit=INDEX_LIMIT + 1)
    except (OSError, safefs.UnsafePathError) as exc:
        raise NetworkError(f"cannot read the NLTK index {path}: {exc}") from None
    if data is None:
        raise NetworkError(f"{folder} has no index.xml: not an NLTK data mirror "
                           f"(`prefetch export {folder} nltk:ID` writes one)")
    if len(data) > INDEX_LIMIT:
        raise NetworkError(f"{path} is larger than {INDEX_LIMIT >> 20} MB: not an NLTK index")
    return nltk_data.parse_index(data, source=str(path))


def _get_object(store, name: str) -> bytes | None:
    try:
        answer = store.client.get_object(Bucket=store.location.bucket, Key=store.location.key_for(name))
        return answer["Body"].read(INDEX_LIMIT + 1)
    except Exception as exc:  # noqa: BLE001 - botocore
        if error_code(exc) in ("404", "NoSuchKey", "NotFound"):
            return None
        raise store_error(exc, f"GET {store.location.url_for(name)}") from None


@dataclass
class Published:
    """What a push or an export put where."""

    packages: list[nltk_data.NltkPackage] = field(default_factory=list)
    collections: dict[str, tuple[str, ...]] = field(default_factory=dict)
    files: list[dict] = field(default_factory=list)  # path, name (in the layout), size, sha256, how


def local_packages(ids: Sequence[str], *, data_dir: Path, records_dir: Path,
                   reference: nltk_data.NltkIndex | None = None) -> tuple[list[tuple[Path, nltk_data.NltkPackage]],
                                                                           dict[str, tuple[str, ...]]]:
    """The zips ``ids`` name in ``data_dir`` (collections of ``reference`` expanded), each with
    the index facts of its bytes; and the collections named.

    Raises:
        NotDownloadedError: a package is not in the data dir. HashMismatchError: a zip the
            snapshot knows, with other bytes, that prefetch did not place. LocalFileError: not a zip.
    """
    reference = reference or nltk_data.load_snapshot()
    collections: dict[str, tuple[str, ...]] = {}
    wanted: dict[str, nltk_data.NltkPackage | None] = {}

    def visit(ident: str, trail: tuple[str, ...]) -> None:
        if ident in reference.collections and ident not in trail:
            collections[ident] = reference.collections[ident]
            for child in reference.collections[ident]:
                visit(child, (*trail, ident))
        else:
            wanted.setdefault(ident, reference.packages.get(ident))

    for ident in ids:
        visit(ident, ())
    found = [_local_package(ident, known, data_dir=data_dir, records_dir=records_dir)
             for ident, known in wanted.items()]
    return found, collections


def _local_package(ident: str, known: nltk_data.NltkPackage | None, *, data_dir: Path,
                   records_dir: Path) -> tuple[Path, nltk_data.NltkPackage]:
    from prefetch.cache.placement import completion_matches, regular_or_none
    from prefetch.store.push import file_digests

    if known is not None:
        candidates = [data_dir.joinpath(*known.path.split("/"))]
    else:  # the team's own package: its subdir is where it lies
        candidates = sorted(data_dir.glob(f"*/{ident}.zip")) + sorted(data_dir.glob(f"*/*/{ident}.zip"))
    path = next((c for c in candidates if regular_or_none(c) is not None), None)
    if path is None:
        raise NotDownloadedError(f"nltk:{ident} is not in {data_dir}; `prefetch get nltk:{ident}` first")
    sha256, md5, size = file_digests(path)
    placed = completion_matches(records_dir, path, path.stat())
    if known is not None and not placed:
        algorithm, digest = known.expected
        if (sha256 if algorithm == "sha256" else md5) != digest or size != known.size:
            raise HashMismatchError(f"{path}: its {algorithm} is not the one the built-in NLTK index gives for "
                                    f"nltk:{ident}, and prefetch did not place it; not published "
                                    f"(`prefetch get nltk:{ident}` replaces it)")
    try:
        with zipfile.ZipFile(path) as zf:
            unzipped = sum(i.file_size for i in zf.infolist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise LocalFileError(f"{path} is not a readable zip ({exc}); not published") from None
    subdir = path.parent.relative_to(data_dir).as_posix()
    unzip = known.unzip if known is not None else (path.parent / ident).is_dir()
    return path, nltk_data.NltkPackage(id=ident, subdir=subdir, size=size, unzipped_size=unzipped, md5=md5,
                                       unzip=unzip, sha256=sha256)


def push_nltk(ids: Sequence[str], dest: str, *, data_dir: Path, state_dir: Path, env: Mapping[str, str],
              on_result: Callable | None = None) -> list:
    """Upload the packages ``ids`` name to ``dest/packages/<subdir>/<id>.zip`` and merge ``dest/index.xml``.

    Returns the ``PushResult`` of each zip, then the index's.

    Raises:
        NotDownloadedError, HashMismatchError, LocalFileError, StoreError, MissingExtraError.
    """
    from prefetch.store.push import PushResult, part_size_from_env, push_file

    found, collections = local_packages(ids, data_dir=data_dir, records_dir=state_dir / "placed")
    store = open_store(dest, env=env)
    results = []
    for path, pkg in found:
        result = push_file(store, path, f"packages/{pkg.path}", state_dir=state_dir,
                           part_size=part_size_from_env(env), digests=(pkg.sha256, pkg.md5, pkg.size))
        results.append(result)
        if on_result is not None:
            on_result(result)
    old = _get_object(store, INDEX)
    index = nltk_data.merge_index(nltk_data.parse_index(old, source=store.location.url_for(INDEX)) if old else None,
                                  [p for _, p in found], collections, source=store.location.url)
    body = nltk_data.render_index(index)
    import hashlib

    sha256, md5 = hashlib.sha256(body).hexdigest(), hashlib.md5(body).hexdigest()
    try:
        store.client.put_object(Bucket=store.location.bucket, Key=store.location.key_for(INDEX), Body=body,
                                Metadata={"sha256": sha256, "md5": md5})
    except Exception as exc:  # noqa: BLE001 - botocore
        raise store_error(exc, f"PUT {store.location.url_for(INDEX)}") from None
    result = PushResult(INDEX, "", store.location.url_for(INDEX), "uploaded", len(body), sha256)
    results.append(result)
    if on_result is not None:
        on_result(result)
    return results


def export_nltk(directory: Path, ids: Sequence[str], *, data_dir: Path, state_dir: Path) -> Published:
    """Write ``DIR/packages/<subdir>/<id>.zip`` for the packages ``ids`` name and merge ``DIR/index.xml``.

    Raises:
        NotDownloadedError, HashMismatchError, LocalFileError, UnsafePathError.
    """
    from prefetch.cache.placement import make_dirs
    from prefetch.fs import safefs
    from prefetch.store.export import _place

    directory = expand_path(directory, "DIRECTORY").absolute()
    safefs.check_link_ok(directory)
    found, collections = local_packages(ids, data_dir=data_dir, records_dir=state_dir / "placed")
    make_dirs(directory)
    try:
        old = read_folder_index(directory) if safefs.lstat_or_none(directory / INDEX) is not None else None
    except NetworkError as exc:
        raise UsageError(f"{directory / INDEX} is there but is not an NLTK index ({exc}); "
                         "export into an empty folder or an NLTK data mirror") from None
    out = Published(packages=[p for _, p in found], collections=collections)
    for path, pkg in found:
        target = directory / "packages" / pkg.subdir / f"{pkg.id}.zip"
        make_dirs(target.parent)
        listed = old.packages.get(pkg.id) if old else None
        # A copy: nltk 3.10 refuses to open a data dir zip that has a second name (st_nlink > 1).
        how = _place(path, target, pkg.sha256, pkg.sha256 if listed is not None and listed.sha256 == pkg.sha256 else None,
                     link=False)
        out.files.append({"path": str(target), "name": f"packages/{pkg.path}", "size": pkg.size,
                          "sha256": pkg.sha256, "how": how})
    index = nltk_data.merge_index(old, out.packages, collections, source=str(directory))
    _write_index(directory / INDEX, nltk_data.render_index(index))
    return out


def _write_index(path: Path, body: bytes) -> None:
    from prefetch.fs.files import local_error, replace_file

    try:
        replace_file(path, body, checked=True)  # a planted link or another user's index.xml: refused
    except OSError as exc:
        raise local_error(exc, path) from None


