"""Where a file lands and what is already there: proofs, names, temp files.

What sits at a final path is trusted only with proof (its expected hash, or
prefetch's own completion record for that very file); extra names are hard links
made through an exclusive temp name; everything replaced or removed must be ours
(``prefetch.fs.safefs``): in a shared cache another user's entry is refused, never
followed or deleted. Extraction markers record what each extraction placed.

Completion records (what proves a file at a final path is the one prefetch placed) are
``cache/completion.py``'s; the names are re-exported here.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from prefetch.errors import PrefetchError
from prefetch.model.events import Event, EventKind, EventSink
from prefetch.fs import safefs  # (at the top: a function-level `from` import costs a call per file)
from prefetch.fs.files import local_error
from prefetch.cache.layout import part_path, state_path
from prefetch.fs.hashing import first_mismatch, sha1

from prefetch.cache.completion import _dumps, _loads  # (markers are JSON as records are)
from prefetch.cache.completion import (  # noqa: F401 - re-exported: callers use placement.write_completion ...
    completion_matches,
    completion_path,
    from_other_link,
    other_version,
    read_completion,
    write_completion,
)

if TYPE_CHECKING:
    from prefetch.model.plans import FilePlan


def regular_or_none(path: Path) -> os.stat_result | None:
    """stat of the regular file at ``path`` (a symlink is followed for reading), None if absent.

    Raises:
        UnsafePathError: something that is not a regular file is there.
    """
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise safefs.refuse(path, "it is a symbolic link loop") from None
        raise local_error(exc, path) from None
    if not stat.S_ISREG(st.st_mode):
        raise safefs.refuse(path, f"it is {safefs.kind_of(st)}")
    return st


_LOOK = object()


def _recorded_with(records_dir: Path, final: Path, lst, expected) -> bool:
    """``final`` is the very file prefetch placed (inode, size, mtime) after checking this hash.

    Not for a file others may write (group or world write bits: a shared cache's umask 002):
    the record may be an attribute on the file, and whoever may write the file may write it
    too, naming a changed file's new mtime; such a file is hashed."""
    if not stat.S_ISREG(lst.st_mode) or safefs.is_foreign(lst) or lst.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    record = read_completion(records_dir, final, lst)
    return (record is not None and record.get("algorithm") == expected.algorithm
            and isinstance(record.get("digest"), str) and expected.matches(record["digest"]))


def existing_is_good(plan: FilePlan, records_dir: Path, on_event: EventSink, *, lst=_LOOK) -> bool:
    """Is what sits at the final path a complete, verified file? Never opens a FIFO or device.

    With an expected hash: it must match (whoever put it there), or prefetch's completion
    record of that very file must say it matched when prefetch placed it (a file of hashed
    shards read epoch after epoch is not hashed again each time). Without one, mere
    existence proves nothing (a truncated wget leftover, ``/dev/null``): only
    prefetch's own completion record, written when it placed that very file (same
    inode, size and mtime), counts, and for a plain URL's file (``by_link``) only when it
    names this link or none (``from_other_link``), for a file of a listed version
    (``FilePlan.version``) only when it names that one, and only while the file has the size its
    source lists (``FileSpec.size``, when known). Anything else is downloaded again, and replaced
    only if it is ours to replace.

    ``lst``: the final path's ``lstat`` (None: nothing there) when the caller just took it.

    Raises:
        UnsafePathError: a FIFO, device, another user's link, or another user's file
            that is not verified, at the final path.
    """
    final = plan.final
    if lst is _LOOK:
        lst = safefs.lstat_or_none(final)
    if lst is None:
        return False
    if stat.S_ISLNK(lst.st_mode):
        safefs.check_link_ok(final)  # our own (the user's) link: read through it, replace it by rename
    st = regular_or_none(final)
    if st is None:  # a dangling link of ours
        return False
    expected = plan.spec.expected
    if expected is not None:
        # (a record vouches for the first hash; every other, an md5 beside the sha256, is checked too)
        recorded = _recorded_with(records_dir, final, lst, expected)
        wrong = first_mismatch(final, plan.spec.more_hashes if recorded else plan.spec.hashes)
        if wrong is None:
            return True
        expected = wrong[0]
        why = f"does not match its {expected.algorithm}"
    elif (stat.S_ISREG(lst.st_mode) and not safefs.is_foreign(lst)
          and (record := read_completion(records_dir, final, lst)) is not None):
        size = plan.spec.size
        if size is not None and st.st_size != size:
            # (the source lists another size now: a hub file changed at the same path, the old bytes kept)
            why = (f"is {st.st_size:,} bytes where its source now lists {size:,}: it changed there; downloading "
                   f"the new one, which replaces it once complete and checked")
        elif from_other_link(record, plan):
            # (a plain URL's file: the same name from another link, v1/x.csv for v2/x.csv, is not this one)
            why = ("was downloaded from another link (its record says so), not from this one; downloading this "
                   "link's file, which replaces it once complete and checked")
        elif other_version(record, plan):
            why = ("was placed at another version than the one its source now lists; downloading that one, "
                   "which replaces it once complete and checked")
        else:
            return True
    else:
        why = "has no record of a completed prefetch download (and no hash to check it); downloading again"
    if expected is not None:
        why += "; downloading again"
    safefs.check_replaceable(final)  # about to be replaced: only a regular file of ours
    on_event(Event(EventKind.NOTE, plan.label, message=f"{final} {why}"))
    return False


def adopt_copy(plan: FilePlan, on_event: EventSink) -> bool:
    """Hard-link (or copy) one of ``plan.copies`` to the final path when it matches every expected hash.

    The same bytes in another cache (Keras's ``cifar-10-batches-py.tar.gz`` for
    torchvision's ``cifar-10-python.tar.gz``) are not downloaded twice. Without an
    expected hash nothing is adopted.
    """
    expected = plan.spec.expected
    if expected is None:
        return False
    for copy in plan.copies:
        try:
            lst = safefs.lstat_or_none(copy)
            # only a regular file of ours: a link, or another user's file (whose inode they could
            # rewrite after the check), is never taken in
            if lst is None or not stat.S_ISREG(lst.st_mode) or safefs.is_foreign(lst):
                continue
            safefs.check_dir_chain(copy.parent)
            if first_mismatch(copy, plan.spec.hashes) is not None:
                continue
        except (OSError, PrefetchError):
            continue
        link_or_copy(copy, plan.final)
        linked = same_inode(copy, plan.final)
        if not linked and first_mismatch(plan.final, plan.spec.hashes) is not None:
            discard(plan.final)  # another filesystem: the copy is checked too
            continue
        how = "linked" if linked else "copied (another filesystem)"
        checked = "+".join(h.algorithm for h in plan.spec.hashes)
        on_event(Event(EventKind.NOTE, plan.label, message=f"{how} from {copy} (the same bytes, {checked} ok)"))
        return True
    return False


def same_inode(a: Path, b: Path) -> bool:
    try:
        sa, sb = os.lstat(a), os.lstat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def own_paths(plan: FilePlan) -> list[Path]:
    """Every path of ``plan`` that an archive member may never replace."""
    own = []
    for p in plan.paths:
        own += [p, part_path(p), state_path(p)]
    return own


def marker_path(markers_dir: Path, final: Path, into: Path) -> Path:
    key = sha1(f"{final.absolute()}\0{into.absolute()}".encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return markers_dir / f"{key}.json"


def extracted_entries(marker: Path, into: Path) -> list[str]:
    """The top-level entries a past extraction put into ``into``, if all still exist (and are ours)."""
    try:
        entries = [str(e) for e in _loads(safefs.read_bytes(marker) or b"")["entries"]]
    except (OSError, ValueError, KeyError, TypeError, safefs.UnsafePathError):
        return []
    def ours(path: Path) -> bool:
        st = safefs.lstat_or_none(path)
        return st is not None and not safefs.is_foreign(st) and not stat.S_ISLNK(st.st_mode)

    return entries if entries and all(ours(into / e) for e in entries) else []


def private_tree(into: Path, entries) -> bool:
    """No folder or file at or under ``into/<entry>`` has a group or world write bit (links are
    not judged): what nltk 3.10 requires of a tree it reads (``FilePlan.private``)."""
    for entry in entries:
        top = str(into / entry)
        if _writable_by_others(top):
            return False
        for here, dirs, files in os.walk(top):
            if any(_writable_by_others(os.path.join(here, name)) for name in dirs + files):
                return False
    return True


def _writable_by_others(path: str) -> bool:
    st = safefs.lstat_or_none(path)
    return st is not None and not stat.S_ISLNK(st.st_mode) and bool(st.st_mode & 0o022)


def entries_before_merge(into: Path, marker: Path) -> set[str]:
    """What is in ``into`` before an extraction merges into it, less the entries this file's
    last extraction created itself (its marker says so): those stay its own."""
    try:
        names = set(os.listdir(into))
    except OSError:
        return set()
    try:
        old = _loads(safefs.read_bytes(marker) or b"{}")
        created = set(map(str, old.get("entries", []))) - set(map(str, old.get("merged", [])))
    except (OSError, ValueError, TypeError, AttributeError, safefs.UnsafePathError):
        created = set()
    return names - created


def write_marker(marker: Path, into: Path, entries: Sequence[str], *, merged: Sequence[str] = ()) -> None:
    """Record what an extraction placed into ``into``: its top-level ``entries``, and which of them
    were there already and merged into (``merged``: not its own to remove)."""
    from prefetch.fs.files import replace_file
    from prefetch.errors import UnsafePathError

    record = {"into": str(into), "entries": list(entries)}
    if merged:
        record["merged"] = list(merged)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        replace_file(marker, _dumps(record), checked=True)
    except (OSError, UnsafePathError):
        pass  # only an optimisation: without it we extract again next time


def same_file(alias: Path, final: Path) -> bool:
    """``alias`` is our hard link to ``final`` (or our own copy of the same size, where links fail)."""
    a, f = safefs.lstat_or_none(alias), safefs.lstat_or_none(final)
    if a is None or f is None or not stat.S_ISREG(a.st_mode) or safefs.is_foreign(a):
        return False
    return (a.st_dev, a.st_ino) == (f.st_dev, f.st_ino) or (a.st_size == f.st_size and a.st_mtime_ns >= f.st_mtime_ns)


def link_or_copy(source: Path, alias: Path) -> None:
    """Give ``source``'s bytes the name ``alias`` atomically (hard link, else copy).

    The temp name is created exclusively (never written through), and ``alias`` is
    replaced only if it is absent or a regular file of ours.
    """
    make_dirs(alias.parent)
    safefs.check_dir_chain(alias.parent)
    safefs.check_replaceable(alias)
    tmp = alias.with_name(f".{alias.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
    try:
        try:
            os.link(source, tmp, follow_symlinks=False)
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise
            fd = safefs.open_file(source, os.O_RDONLY, own=False)
            with os.fdopen(fd, "rb") as src:
                out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
                with os.fdopen(out, "wb") as dst:
                    import shutil

                    shutil.copyfileobj(src, dst, 1 << 20)
        safefs.replace(tmp, alias)
    except OSError as exc:
        safefs.remove_own(tmp)
        raise local_error(exc, alias) from None
    except PrefetchError:
        safefs.remove_own(tmp)
        raise


def rename(source: Path, target: Path) -> None:
    try:
        safefs.replace(source, target)
    except OSError as exc:
        raise local_error(exc, target) from None


def discard(*paths: Path) -> None:
    """Remove our own in-flight files (another user's entry of that name is left alone)."""
    for p in paths:
        try:
            safefs.remove_own(p)
        except OSError:
            pass


def make_dirs(path: Path, *, private: bool = False, made: list | None = None) -> None:
    """``mkdir -p path``; ``private``: the levels created get no group or world write bit whatever
    the umask (``FilePlan.private``); ``made``: the levels created are appended to it."""
    try:
        # a directory link another user planted anywhere above is never followed
        safefs.make_dirs(path, mode=0o755 if private else 0o777, made=made)
    except OSError as exc:
        import errno

        if exc.errno in (errno.EEXIST, errno.ENOTDIR):  # a file, or a link pointing nowhere, where a folder goes
            for p in (path, *path.parents):
                if p.is_symlink() and not p.exists():  # (its target on a volume not mounted yet)
                    why = f"a symbolic link to {os.readlink(p)}, which does not exist; create that folder"
                elif p.exists() and not p.is_dir():
                    why = f"a file, not a folder ({exc.strerror}); move it"
                else:
                    continue
                from prefetch.errors import LocalFileError

                raise LocalFileError(f"cannot make the folder {path}: {p} is {why}, or choose another path") from None
        raise local_error(exc, path) from None
