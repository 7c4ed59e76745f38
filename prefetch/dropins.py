"""Drop-ins for ``keras.utils.get_file`` and ``pooch.retrieve``, on prefetch's download flow.

``prefetch.get_file`` takes Keras 3's arguments and returns what Keras returns (same
paths, same files on disk, Keras >= 3.6 naming of extracted folders), but downloads
with resume, parallel connections, dataset mirrors and verification, and never leaves
a partial or unverified file at the final path. ``prefetch.fetch`` is the short form,
in ``pooch.retrieve``'s spirit: a URL and a hash in, a ``Path`` out.

Nothing heavy is imported until a function is called (``import prefetch`` stays light).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from prefetch.errors import BadHashError, HashMismatchError, NetworkError, UsageError

_ARCHIVE_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".tbz2", ".tbz", ".txz", ".tar", ".zip")


class FileHashMismatchError(HashMismatchError, ValueError):
    """A download's hash differs from ``file_hash`` (a ``ValueError``, as Keras raises)."""


class InvalidHashError(BadHashError, ValueError):
    """``file_hash``/``known_hash`` is not a valid hex digest (a ``ValueError`` too)."""


class CacheSubdirError(UsageError, ValueError):
    """A relative ``cache_subdir`` that leads out of ``cache_dir`` (a ``ValueError`` too)."""


def get_file(
    fname=None,
    origin=None,
    untar=False,
    md5_hash=None,
    file_hash=None,
    cache_subdir="datasets",
    hash_algorithm="auto",
    extract=False,
    archive_format="auto",
    cache_dir=None,
    force_download=False,
    *,
    mirror: str | Sequence[str] | None = None,
    connections: int | None = None,
    limit_rate: str | float | None = None,
    headers: Mapping[str, str] | Iterable[str] | None = None,
    progress: bool = True,
) -> str:
    """Download ``origin`` into the Keras cache unless it is there; ``keras.utils.get_file``'s contract.

    Arguments and return value as in Keras 3 (>= 3.6): the path of the file, or with
    ``extract``/``untar`` the extraction folder (``<fname>`` for a name without a dot,
    else ``<fname up to the first dot>_extracted``; ``<origin's file name>`` when no
    ``fname`` is given, the archive then being ``<name>_archive``).

    Differences that only show when something goes wrong: a hash mismatch leaves no
    file at the final path (Keras leaves the bad one); an archive member that would
    escape the folder fails the whole extraction (``UnsafeArchiveError``) instead of
    being skipped with a warning.

    Keyword-only extras: ``mirror`` (flat dataset mirror URL(s) or names, default
    ``$PREFETCH_DATASET_MIRROR``), ``connections``, ``limit_rate`` ("2M"),
    ``headers`` ({"Name": "value"}), ``progress`` (lines on stderr).

    Raises:
        ValueError: no origin, a path as ``fname``, no file name in the origin, or
            (``FileHashMismatchError``) the hash does not match.
        NetworkError, LocalFileError, UnsafeArchiveError, IntegrityError, ...: as ``prefetch get``.
    """
    if origin is None:
        raise ValueError('Please specify the "origin" argument (URL of the file to download).')
    if cache_dir is None:
        from prefetch.cache.layout import keras_root

        cache_dir = str(keras_root())
        try:  # `import keras` creates its home; Keras then tests that it is writable
            os.makedirs(os.path.expanduser(cache_dir), exist_ok=True)
        except OSError:
            pass
    if md5_hash is not None and file_hash is None:
        file_hash = md5_hash
        hash_algorithm = "md5"
    datadir_base = os.path.expanduser(cache_dir)
    if not os.access(datadir_base, os.W_OK):
        import tempfile

        datadir_base = os.path.join("/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir(), ".keras")
    datadir = os.path.join(datadir_base, cache_subdir)
    _check_subdir(datadir_base, cache_subdir)
    _make_datadir(datadir)

    provided_fname = fname
    fname = os.fspath(fname) if isinstance(fname, os.PathLike) else fname
    if not fname:
        from urllib.parse import urlsplit

        fname = os.path.basename(urlsplit(origin).path)
        if not fname:
            raise ValueError(
                f"Can't parse the file name from the origin provided: '{origin}'. Please specify the `fname` argument."
            )
    elif os.sep in fname:
        raise ValueError(
            "Paths are no longer accepted as the `fname` argument. To specify the file's parent directory, "
            f"use the `cache_dir` argument. Received: fname={fname}"
        )

    extraction_dir = None
    if extract or untar:
        if provided_fname and "." in fname:
            download_target = os.path.join(datadir, fname)
            extraction_dir = os.path.join(datadir, f"{fname[: fname.find('.')]}_extracted")
        else:
            extraction_dir = os.path.join(datadir, fname)
            download_target = os.path.join(datadir, f"{fname}_archive")
    else:
        download_target = os.path.join(datadir, fname)

    entry = {"url": origin, "out": os.path.abspath(download_target)}
    if file_hash is not None:
        entry[_keras_algorithm(hash_algorithm, str(file_hash))] = str(file_hash)
    # As Keras: a file already at the target is used as it is when no hash is given
    # (with a hash, the flow checks it and downloads again on a mismatch).
    if force_download or file_hash is not None or not os.path.exists(download_target):
        try:
            _download([entry], force=force_download, mirror=mirror, connections=connections,
                      limit_rate=limit_rate, headers=headers, progress=progress)
        except FileHashMismatchError as exc:
            raise FileHashMismatchError(
                f"Incomplete or corrupted file detected. The {hash_algorithm} file hash does not match the "
                f"provided value of {file_hash}. ({exc}; nothing was left at {download_target})") from None
        except NetworkError as exc:
            raise _with_message(exc, f"URL fetch failure on {_shown(origin)}: {exc}") from None

    if extraction_dir is None:
        return download_target
    if untar:
        archive_format = "tar"
    _extract_like_keras(Path(download_target), Path(extraction_dir), archive_format)
    return extraction_dir


def _make_datadir(datadir: str) -> None:
    """``os.makedirs(datadir)`` as Keras does (``a/../b`` makes ``a`` too), after a look at each
    level as written: a symbolic link another user planted on the way is refused
    (``UnsafePathError``, exit 5) before anything is made in its target."""
    from pathlib import Path

    from prefetch.fs.paths import current_dir
    from prefetch.fs.safefs import check_link_ok

    # (not normalized: "a/.." goes through a; an absolute one needs no current dir, which may be removed)
    path = Path(datadir) if os.path.isabs(datadir) else current_dir() / datadir
    for level in reversed((path, *path.parents)):
        check_link_ok(level)
    os.makedirs(datadir, exist_ok=True)


def fetch(
    url: str,
    sha256: str | None = None,
    md5: str | None = None,
    *,
    known_hash: str | None = None,
    fname: str | None = None,
    path: str | os.PathLike | None = None,
    extract: bool = False,
    extract_to: str | os.PathLike | None = None,
    force: bool = False,
    mirror: str | Sequence[str] | None = None,
    connections: int | None = None,
    limit_rate: str | float | None = None,
    headers: Mapping[str, str] | Iterable[str] | None = None,
    progress: bool = False,
) -> Path:
    """Download ``url`` once, verified; return its local ``Path`` (pooch.retrieve's spirit).

    Args:
        url: http(s) URL, ``file://`` URL or local path (a ``#sha256=HEX`` fragment works too).
        sha256, md5: the expected hash; or ``known_hash`` as pooch writes it
            (``"sha256:HEX"``, ``"md5:HEX"`` or bare hex, sha256 when 64 digits).
        fname: file name (default: the URL's); path: directory (default: the Keras
            cache's ``datasets/``, so Keras code finds it too).
        extract: also extract the archive (tar, tar.gz/bz2/xz, zip) safely, each top-level
            entry complete or absent, into ``extract_to`` (default: a folder beside the
            file named like it without the archive suffix); the folder is returned.
        force: download again even if a good file is in place.

    Raises:
        UsageError (bad URL or hash), NetworkError, IntegrityError (hash mismatch;
        nothing left at the path), LocalFileError, UnsafeArchiveError.
    """
    if not isinstance(url, str) and not hasattr(url, "__fspath__"):
        raise UsageError(f"url must be a URL or a local path (a string), got {url!r:.60}")
    url = os.fspath(url)
    if known_hash:
        algorithm, sep, digest = str(known_hash).partition(":")
        if not sep:
            algorithm, digest = ("sha256" if len(algorithm) == 64 else "md5"), algorithm
        algorithm = algorithm.lower().replace("-", "")
        if algorithm not in ("sha256", "md5"):
            raise InvalidHashError(f"known_hash {known_hash!r}: only sha256 and md5 are supported")
        if (algorithm == "sha256" and sha256 and sha256 != digest) or (algorithm == "md5" and md5 and md5 != digest):
            raise InvalidHashError("known_hash and sha256/md5 disagree")
        sha256, md5 = (digest, md5) if algorithm == "sha256" else (sha256, digest)
    if path is None:
        from prefetch.cache.layout import datasets_dir, keras_root

        path = datasets_dir(keras_root())
    elif not isinstance(path, str) and not hasattr(path, "__fspath__"):
        raise UsageError(f"path must be a folder (a string or a path), got {path!r:.60}")
    if fname is not None and not isinstance(fname, str) and not hasattr(fname, "__fspath__"):
        raise UsageError(f"fname must be a file name (a string), got {fname!r:.60}")
    if not fname:
        from urllib.parse import urlsplit

        fname = os.path.basename(urlsplit(url.partition("#")[0]).path)
        if not fname:
            raise UsageError(f"cannot tell a file name from {_shown(url)!r}; give fname=")
    fname = os.fspath(fname)
    if os.path.isabs(fname) or not Path(fname).parts or ".." in Path(fname).parts:
        raise UsageError(f"fname must be a file name inside path, got {fname!r}; give the folder as path=")
    from prefetch.fs.paths import expand_path

    target = expand_path(path, "path").absolute() / fname
    entry = {"url": url, "out": str(target)}
    if sha256:
        entry["sha256"] = sha256
    if md5:
        entry["md5"] = md5
    into = None
    if extract:
        into = (expand_path(extract_to, "extract_to").absolute() if extract_to
                else target.parent / _archive_stem(target.name))
    _download([entry], force=force, mirror=mirror, connections=connections, limit_rate=limit_rate,
              headers=headers, progress=progress, extract_to=into)
    return into if into is not None else target


def _check_subdir(base: str, cache_subdir) -> None:
    """A relative ``cache_subdir`` stays inside ``cache_dir`` (an absolute one is taken as it is, as in Keras)."""
    sub = os.fspath(cache_subdir)
    if os.path.isabs(sub):
        return
    root = os.path.normpath(os.path.abspath(base))
    inside = os.path.normpath(os.path.join(root, sub))
    if inside != root and not inside.startswith(root.rstrip(os.sep) + os.sep):
        raise CacheSubdirError(
            f"cache_subdir {sub!r} leads out of cache_dir {base!r} (to {inside}); give a subdirectory of "
            f"cache_dir, or an absolute path")


def _shown(url: str) -> str:
    from prefetch.net.urls import redact_url

    return redact_url(url)


def _with_message(exc: Exception, message: str) -> Exception:
    """The same error class with another message (its status kept)."""
    new = type(exc).__new__(type(exc))
    Exception.__init__(new, message)
    new.__dict__.update(exc.__dict__)
    return new


def _archive_stem(name: str) -> str:
    """``data.tar.gz`` -> ``data``; a name that is not an archive's gets ``_extracted``."""
    for suffix in _ARCHIVE_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return f"{name}_extracted"


def _keras_algorithm(hash_algorithm: str, file_hash: str) -> str:
    """Keras's resolve_hasher: sha256 if asked, or auto with 64 digits; md5 otherwise."""
    if hash_algorithm == "sha256" or (hash_algorithm == "auto" and len(file_hash) == 64):
        return "sha256"
    return "md5"


def _download(entries: list[dict], *, force: bool, mirror, connections, limit_rate, headers, progress: bool,
              extract_to: Path | None = None) -> None:
    """Run the entries through the ``get`` flow in this process; raise the first failure."""
    import sys

    from prefetch.api import make_request, switch
    from prefetch.errors import error_for_exit_code
    from prefetch.errors import ExitCode
    from prefetch.model.plans import overall_exit_code
    from prefetch.ui.render import make_renderer
    from prefetch.flow.planning import run_request

    switch(progress, "progress")  # (progress="no" is a true string: the lines shown)
    # (make_request: one UsageError naming a bad argument, as ensure gives)
    request = make_request([], urls=entries, force=bool(force), mirror=mirror, connections=connections,
                           limit_rate=limit_rate, headers=headers, extract=extract_to is not None,
                           extract_to=str(extract_to) if extract_to is not None else None)
    import threading

    from prefetch.ui.interrupt import stop_on_interrupt

    renderer = make_renderer(sys.stderr, quiet=not progress, skip_failures=True)
    stop = threading.Event()
    try:
        try:
            with stop_on_interrupt(stop):  # Ctrl-C / a kernel interrupt: stop within a second, resumable
                results = run_request(request, on_event=renderer, stop=stop)
        except BadHashError as exc:
            raise InvalidHashError(str(exc)) from None
    finally:
        renderer.close()
    code = overall_exit_code(results)
    if code:
        message = "; ".join(r.error or r.name for r in results if r.status in ("failed", "interrupted"))
        if code == int(ExitCode.INTEGRITY) and "mismatch" in message:
            raise FileHashMismatchError(message)
        raise error_for_exit_code(code, message)


def _extract_like_keras(archive: Path, into: Path, archive_format) -> None:
    """Keras's extract_archive: the first listed format that matches; a warning if none does."""
    import warnings

    from prefetch.archive.extract import detect_format, extract_archive

    if archive_format is None:
        formats: list[str] = []
    elif archive_format == "auto":
        formats = ["tar", "zip"]
    elif isinstance(archive_format, str):
        formats = [archive_format]
    else:
        formats = list(archive_format)
    for name in formats:
        if name not in ("tar", "zip"):
            raise NotImplementedError(name)
    found = detect_format(archive) if formats else None
    if found is None or found not in formats:
        warnings.warn("Could not extract archive.", stacklevel=3)
        return
    import threading

    from prefetch.ui.interrupt import stop_on_interrupt

    stop = threading.Event()
    # Ctrl-C / a kernel interrupt: the extraction ends before its next member or MiB, nothing of
    # it placed (InterruptedTransferError, as the download's stop), the archive kept for a rerun.
    with stop_on_interrupt(stop):
        extract_archive(archive, into, archive_format=found, stop=stop)
