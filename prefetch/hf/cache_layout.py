"""The Hugging Face cache as huggingface_hub writes it (``file_download.py``).

::

    <root>/models--ORG--NAME/
        blobs/<etag>                      each file's bytes once (sha256 for LFS, git sha1 else)
        snapshots/<commit>/<path>         -> ../../blobs/<etag>  (relative symlinks)
        refs/<revision>                   the commit hash, no newline

prefetch's in-flight files sit beside the blobs, under names huggingface_hub never
reads: ``blobs/<etag>.part`` and its resume state ``blobs/<etag>.part.json``. Not
``<etag>.incomplete``: older huggingface_hub versions resume such a file by appending
from its size, and prefetch's partial files are written at many offsets at once (with
holes), so an old huggingface_hub would turn one into a corrupt blob. The rename from
``.part`` to ``<etag>`` happens in the same directory, so a blob name only ever holds a
complete, verified file; the snapshot link is made after it, the ref last.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from prefetch.errors import NetworkError, PrefetchError
from prefetch.fs.files import local_error


def repo_dir(root: Path, folder: str) -> Path:
    return root / folder


def blob_path(repo: Path, etag: str) -> Path:
    return repo / "blobs" / etag


def snapshot_dir(repo: Path, commit: str) -> Path:
    return repo / "snapshots" / commit


def ref_path(repo: Path, revision: str) -> Path:
    return repo / "refs" / revision


def check_repo_path(path: str, *, label: str) -> PurePosixPath:
    """A file path from the Hub's listing, refused if it could leave the snapshot folder.

    Raises:
        NetworkError: an absolute path, ``..``, or an empty part (a hostile or broken endpoint).
    """
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or "\\" in path or "\0" in path or any(p in ("", ".", "..") for p in path.split("/")):
        raise NetworkError(f"{label}: the Hub listed an unsafe file path {path!r}; refusing it")
    return pure


def listed_twice(path: str, *, label: str) -> NetworkError:
    """A hub listing with two entries for ``path``: refused whole (exit 3), never one of them kept
    by the order a hostile or broken endpoint chose (``ms.api.list_files`` refuses the same way)."""
    return NetworkError(f"{label}: the listing has {path!r} twice; a repo holds one file of a name: refusing it")


def check_tree(paths, *, label: str) -> None:
    """Refuse a listing no folder can hold: an unsafe path (:func:`check_repo_path`), a path
    listed twice (which of its two blobs would the snapshot entry be?), or a path that is both a
    file and a folder of another (``a`` and ``a/b``). A git tree can list none of these; a
    hostile or broken endpoint can.

    Raises:
        NetworkError: such a path or pair (before any byte is fetched).
    """
    files: set[str] = set()
    for path in paths:
        check_repo_path(path, label=label)
        if path in files:
            raise listed_twice(path, label=label)
        files.add(path)
    for path in files:
        parts = path.split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if folder in files:
                raise NetworkError(f"{label}: the listing has {folder!r} both as a file and as the folder of "
                                   f"{path!r}; no folder can hold both: refusing it")


def pointer_path(repo: Path, commit: str, path: str) -> Path:
    return snapshot_dir(repo, commit).joinpath(*path.split("/"))


def link_snapshot(repo: Path, commit: str, path: str, etag: str) -> Path:
    """Make ``snapshots/<commit>/<path>`` a relative symlink to ``blobs/<etag>`` (atomically).

    An entry that already points at that blob is left alone; our own entry of that name (a
    stale link, a copied file) is replaced by renaming a new link over it, never written
    through. Another user's entry, or a folder link another user planted on the way, is
    refused (the hub cache may be shared).

    Raises:
        UnsafePathError: something prefetch did not create is in the way.
        LocalFileError: the snapshot folder cannot be written.
    """
    from prefetch.fs import safefs

    pointer = pointer_path(repo, commit, path)
    blob = blob_path(repo, etag)
    target = os.path.relpath(blob, pointer.parent)
    try:
        safefs.make_dirs(pointer.parent)
        st = safefs.lstat_or_none(pointer)
        if st is not None and stat.S_ISLNK(st.st_mode) and os.readlink(pointer) == target:
            clear_no_exist(repo, commit, path)
            return pointer
        if st is not None and (stat.S_ISDIR(st.st_mode) or safefs.is_foreign(st)):
            safefs.check_owned(pointer, st)  # raises: a folder, or another user's entry
        tmp = pointer.with_name(f".{pointer.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            os.symlink(target, tmp)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            # A filesystem without symlinks: huggingface_hub then keeps a copy in the snapshot.
            fd = safefs.open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "wb") as out, open(blob, "rb") as src:
                import shutil

                shutil.copyfileobj(src, out)
        try:
            dfd = os.open(pointer.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                os.replace(tmp.name, pointer.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            finally:
                os.close(dfd)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise local_error(exc, pointer) from None
    clear_no_exist(repo, commit, path)
    return pointer


def clear_no_exist(repo: Path, commit: str, path: str) -> None:
    """Remove huggingface_hub's ``.no_exist/<commit>/<path>``, now that the file is in the snapshot.

    huggingface_hub writes that empty file when the Hub answers 404 for a file at a commit
    (a mirror that has not synced it yet does), and ``try_to_load_from_cache`` (what
    transformers asks first, and offline) answers "does not exist" from it before it looks at
    the snapshot. Only our own regular file, never through another user's folder link;
    another user's marker stays (it cannot be removed from a shared folder safely).
    """
    folder = os.path.join(repo, ".no_exist", commit)
    if not os.path.lexists(folder):  # (nearly always: one lstat a file)
        return
    from prefetch.errors import UnsafePathError
    from prefetch.fs import safefs

    marker = os.path.join(folder, *path.split("/"))
    try:
        if not os.path.lexists(marker):
            return
        safefs.check_dir_chain(marker, top=repo)
        st = os.lstat(marker)
        if stat.S_ISREG(st.st_mode) and not safefs.is_foreign(st):
            os.unlink(marker)
    except (OSError, UnsafePathError):
        pass


def tree_path(repo: Path, commit: str) -> Path:
    return repo / "trees" / f"{commit}.json"


def write_tree(repo: Path, commit: str, files) -> None:
    """``trees/<commit>.json``: the commit's whole listing, as huggingface_hub >= 2.4 caches it
    (``_tree_cache.py``, format 1) after listing a repo. Its ``get_cached_repo_tree`` reads it, its
    ``snapshot_download`` skips the listing with it and, offline, calls a snapshot missing a listed
    file incomplete. A commit's listing never changes: one already there is kept. Best effort, as
    huggingface_hub writes it: the files are in place without it.
    """
    from prefetch.fs.files import replace_file

    path = tree_path(repo, commit)
    entries = {}
    for f in files:
        entry = {"size": f.size, "blob_id": f.oid}
        if f.sha256:
            entry.update(lfs_sha256=f.sha256, lfs_size=f.size)
        if f.xet_hash:
            entry["xet_hash"] = f.xet_hash
        entries[f.path] = entry
    # (no indent: huggingface_hub indents its own, but json encodes 100,000 entries in C only without one)
    body = json.dumps({"format_version": 1, "files": dict(sorted(entries.items()))}, separators=(",", ":"))
    try:
        if os.path.lexists(path):
            return
        make_dirs(path.parent)
        replace_file(path, body.encode("utf-8"), checked=True)
    except (OSError, PrefetchError):
        pass


def make_dirs(leaf: Path) -> None:
    """``mkdir -p leaf``, never through a folder link another user planted (the hub cache may be shared).

    Raises:
        UnsafePathError: a planted link is on the way. LocalFileError: it cannot be created.
    """
    from prefetch.fs import safefs

    try:
        safefs.make_dirs(leaf)
    except OSError as exc:
        raise local_error(exc, leaf) from None


def write_ref(repo: Path, revision: str, commit: str) -> None:
    """``refs/<revision>`` holds ``commit`` (no newline), replaced atomically; nothing for a commit hash.

    Raises:
        UnsafePathError: a link, or another user's entry, is at the ref or on the way to it.
        LocalFileError: the refs folder cannot be written.
    """
    from prefetch.fs import safefs
    from prefetch.fs.files import replace_file

    if revision == commit:
        return
    ref = ref_path(repo, revision)
    make_dirs(ref.parent)
    try:
        if safefs.read_bytes(ref, own=False) == commit.encode():
            return  # a regular file already naming the commit (anyone's): nothing to write
        replace_file(ref, commit.encode(), checked=True)
    except OSError as exc:
        raise local_error(exc, ref) from None


def read_ref(repo: Path, revision: str) -> str | None:
    """The commit ``refs/<revision>`` names, or None: absent, not a regular file (never read through a
    link or from a FIFO), or not a commit hash (a planted ``../..`` must never become a path)."""
    from prefetch.errors import UnsafePathError
    from prefetch.fs import safefs

    try:
        data = safefs.read_bytes(ref_path(repo, revision), own=False, limit=4096)
    except (OSError, UnsafePathError):
        return None
    commit = (data or b"").decode("ascii", "replace").strip()
    return commit if _COMMIT.fullmatch(commit) else None


_COMMIT = re.compile(r"[0-9a-f]{40}")


def hf_lock_path(root: Path, folder: str, etag: str) -> Path:
    """The lock huggingface_hub takes while it downloads a blob: ``<root>/.locks/<folder>/<etag>.lock``."""
    return root / ".locks" / folder / f"{etag}.lock"


@dataclass
class CachedRepo:
    """A repo in the Hugging Face cache, as ``prefetch list`` shows it (no hashing)."""

    name: str  # hf://... label
    path: str
    state: str = "complete"  # complete | partial
    revisions: dict[str, str] = field(default_factory=dict)  # ref -> commit
    files: int = 0  # snapshot entries whose blob is present
    missing: int = 0  # snapshot entries whose blob is gone
    size: int = 0  # bytes in complete blobs
    partial: int = 0  # bytes on disk in prefetch's unfinished blobs


def scan_cache(root: Path) -> list[CachedRepo]:
    """Every repo folder under ``root`` (``models--``, ``datasets--``, ``spaces--``)."""
    from prefetch.engine.resume_state import read_progress

    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    prefixes = {"models": "", "datasets": "datasets/", "spaces": "spaces/"}
    repos = []
    for folder in folders:
        kind, _, rest = folder.name.partition("--")
        if kind not in prefixes or not rest:
            continue
        repo = CachedRepo(name="hf://" + prefixes[kind] + rest.replace("--", "/"), path=str(folder))
        refs = folder / "refs"
        for ref in sorted(refs.rglob("*")) if refs.is_dir() else []:
            name = str(ref.relative_to(refs))
            commit = read_ref(folder, name) if ref.is_file() else None
            if commit:
                repo.revisions[name] = commit
        snaps = folder / "snapshots"
        for entry in snaps.rglob("*") if snaps.is_dir() else []:
            if entry.is_symlink() or entry.is_file():
                if entry.exists():
                    repo.files += 1
                else:
                    repo.missing += 1
        blobs = folder / "blobs"
        for blob in blobs.iterdir() if blobs.is_dir() else []:
            try:
                if blob.name.endswith(".part"):
                    progress = read_progress(blob, blob.with_name(blob.name + ".json"))
                    repo.partial += progress[0] if progress else 0
                elif "." not in blob.name and blob.is_file():
                    repo.size += blob.stat().st_size
            except OSError:
                pass
        if repo.partial or repo.missing or not repo.revisions and not repo.files:
            repo.state = "partial"
        repos.append(repo)
    return repos


def verify_repo(root: Path, repo) -> list:
    """Re-hash every snapshot entry of ``repo`` (``HubRepo``) at its cached revision.

    Blob names are hashes: 64 hex digits the sha256 of an LFS file, 40 the git blob
    sha1 of the others.

    Raises:
        UsageError: the repo (or that revision) is not in the cache.
    """
    import hashlib

    from prefetch.model.plans import VerifyResult
    from prefetch.errors import UsageError
    from prefetch.fs.hashing import hash_file, update_from_file

    folder = root / repo.folder
    commit = repo.revision if repo.is_commit else read_ref(folder, repo.revision)
    snap = snapshot_dir(folder, commit) if commit else None
    if snap is None or not snap.is_dir():
        raise UsageError(f"{repo.label} is not in the Hugging Face cache {root}; `prefetch get {repo.label}` fetches it")
    results = []
    for entry in sorted(p for p in snap.rglob("*") if p.is_symlink() or p.is_file()):
        name = os.path.basename(os.readlink(entry)) if entry.is_symlink() else ""
        algorithm = "sha256" if len(name) == 64 else "git-sha1" if len(name) == 40 else None
        if not entry.exists():
            results.append(VerifyResult(str(entry), "missing", algorithm, name or None, None))
            continue
        if algorithm is None:
            results.append(VerifyResult(str(entry), "unchecked", "sha256", None, hash_file(entry, "sha256")))
            continue
        if algorithm == "sha256":
            got = hash_file(entry, "sha256")
        else:
            hasher = hashlib.sha1(f"blob {entry.stat().st_size}\0".encode())
            update_from_file(hasher, entry, 0, None)
            got = hasher.hexdigest()
        results.append(VerifyResult(str(entry), "ok" if got == name else "mismatch", algorithm, name, got))
    return results
