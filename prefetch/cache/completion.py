"""Completion records: the proof that a file at a final path is the very one prefetch placed.

A completion record names the file by path, size, dev, inode and mtime (plus the digest and
algorithm when a hash was checked, and when it was placed). It is kept in one of two forms:

* on the placed file, as the extended attribute ``user.prefetch.placed`` (where the
  filesystem takes user attributes): for a file placed without a digest, the common case,
  a compact binary value that fits in an ext4 inode (no block of its own: a 16 KiB file
  takes 16 KiB, not 20), ``struct`` ``<BQQQqd12s``, 53 bytes: the version byte 1, size,
  dev, ino, mtime_ns, the time it was placed (seconds, a double) and the first 12 bytes of
  the blake2b hash of the absolute path (``os.fsencode(str(final.absolute()))``) in place
  of the path. A file of a plain URL download (``FilePlan.by_link``) also names its link:
  ``<BQQQqd6s6s>``, 53 bytes, version byte 2, the path's 6-byte blake2b and then the
  6 bytes of ``net.urls.link_key`` (the URL without its signature or token). A record with a
  digest (or a version: ``FilePlan.version``, a hub listing's per-file revision) is JSON of path,
  size, dev, ino, mtime_ns, digest, algorithm, placed, link (its key, never the URL: whoever may
  read the file reads it) and version;
* else in a file of the state dir's ``placed/`` (``completion_path``): JSON, with the URLs.
  Always there for a file others may write (another user's, or one with a group or world
  write bit): they may set its attributes too, so an attribute on such a file is never read.

A reader decodes both attribute forms (and the JSON attribute of earlier versions) to one
dict shape; any value it cannot read (empty, cut short, another version byte, not JSON)
counts as no record, never an error: the file is checked or fetched again.
"""

from __future__ import annotations

import os
import stat
import struct
import time
from pathlib import Path
from typing import TYPE_CHECKING

from prefetch.fs import safefs  # (at the top: a function-level `from` import costs a call per file)
from prefetch.fs.hashing import blake2b, sha1
from prefetch.net.urls import link_key, redact_url, same_link

if TYPE_CHECKING:
    from prefetch.model.plans import FilePlan


def completion_path(records_dir: Path, final: Path) -> Path:
    return records_dir / (sha1(str(final.absolute()).encode("utf-8", "surrogateescape")).hexdigest()[:24] + ".json")


def write_completion(records_dir: Path, plan: FilePlan, transfer, *, st: os.stat_result | None = None) -> None:
    """Record that prefetch placed this very file complete (size, inode, mtime, validators);
    ``st``: its stat when the caller took it (of the ``.part`` just renamed into place)."""
    try:
        st = st or os.lstat(plan.final)
        record = {
            "path": str(plan.final.absolute()),
            "size": st.st_size,
            "dev": st.st_dev,
            "ino": st.st_ino,
            "mtime_ns": st.st_mtime_ns,
            "digest": transfer.digest,
            "algorithm": plan.spec.expected.algorithm if plan.spec.expected else None,
            "placed": time.time(),
            "link": link_key(plan.spec.url) if plan.by_link and plan.spec.url else None,
        }
        if plan.version is not None:  # (JSON then: the compact forms have no room for it)
            record["version"] = plan.version
        # On the file, readable by whoever may read the file: no URLs (in a private records_dir, they are).
        # Never on a file others may write: they may write its attribute too (``_others_may_write``)
        if not _others_may_write(st) and _record_on_file(plan.final, _compact(record) or _dumps(record)):
            return
        record["urls"] = [redact_url(u) for u in plan.spec.urls]  # never a password
        data = _dumps(record)
        path = completion_path(records_dir, plan.final)
        try:
            _write_record(path, data)
        except FileNotFoundError:  # the first record of this state dir (not a mkdir per file)
            records_dir.mkdir(parents=True, exist_ok=True)
            _write_record(path, data)
    except (OSError, safefs.UnsafePathError):
        pass  # without it, a file with no hash is downloaded again next time: never wrong


def _write_record(path: Path, data: bytes) -> None:
    """A new record is created in place (``O_EXCL | O_NOFOLLOW``: never through a planted name),
    an existing one replaced through a temp file. No temp name and rename for the first
    record of a file (one of thousands in a run of small files): a reader that meets a record
    still being written, or one cut short by a crash, finds no valid JSON in it, which
    counts as no record (the file is checked or fetched again), as before it existed."""
    from prefetch.fs.files import replace_file

    try:
        safefs.write_new(path, data, mode=0o666)  # (the umask applies, as to replace_file's temp file)
    except FileExistsError:  # a record of an earlier placement (or a planted name: refused here)
        replace_file(path, data, checked=True)


_XATTR = "user.prefetch.placed"  # the record kept on the placed file itself (no file of its own)


# The compact attribute (see the module doc): version, size, dev, ino, mtime_ns, placed, path hash.
# 53 bytes: ext4 keeps up to 56 bytes of this attribute's value in a 256-byte inode.
_COMPACT = struct.Struct("<BQQQqd12s")
_COMPACT_VERSION = 1  # never b"{"[0], which starts the JSON form
_LINKED = struct.Struct("<BQQQqd6s6s")  # the same, with the link's key (a plain URL's file): as small
_LINKED_VERSION = 2


def _dumps(record: dict) -> bytes:
    """``record`` as JSON (json is imported where a record needs it: a plain placement writes the compact form)."""
    import json

    return json.dumps(record).encode("utf-8")


def _loads(raw: bytes | str):
    import json

    return json.loads(raw)


def _path_hash(path: str, size: int = 12) -> bytes:
    return blake2b(os.fsencode(path), digest_size=size).digest()  # (6 bytes: another hash, not 12's start)


def _compact(record: dict) -> bytes | None:
    """``record`` as the compact attribute; None when it has a digest (JSON then) or does not fit."""
    if record["digest"] is not None or record["algorithm"] is not None or record.get("version") is not None:
        return None
    try:
        if record["link"] is not None:
            return _LINKED.pack(_LINKED_VERSION, record["size"], record["dev"], record["ino"], record["mtime_ns"],
                                record["placed"], _path_hash(record["path"], 6), bytes.fromhex(record["link"]))
        return _COMPACT.pack(_COMPACT_VERSION, record["size"], record["dev"], record["ino"], record["mtime_ns"],
                             record["placed"], _path_hash(record["path"]))
    except (struct.error, TypeError, UnicodeError, ValueError):  # a value out of range on some platform: JSON
        return None


def _from_attribute(raw: bytes, path: str) -> dict | None:
    """The record an attribute's value holds, if it names ``path``; None for anything else
    (never an error: a value it cannot read is no record)."""
    try:
        if raw[:1] == b"{":  # JSON: a record with a digest, or one written by an earlier version
            record = _loads(raw)
            return record if isinstance(record, dict) and record.get("path") == path else None
        link = None
        if len(raw) == _LINKED.size and raw[0] == _LINKED_VERSION:
            _, size, dev, ino, mtime_ns, placed, digest, key = _LINKED.unpack(raw)
            link = key.hex()
        elif len(raw) == _COMPACT.size and raw[0] == _COMPACT_VERSION:
            _, size, dev, ino, mtime_ns, placed, digest = _COMPACT.unpack(raw)
        else:
            return None
        if digest != _path_hash(path, len(digest)):
            return None
    except (ValueError, RecursionError, struct.error):  # (RecursionError: JSON nested too deep)
        return None
    return {"path": path, "size": size, "dev": dev, "ino": ino, "mtime_ns": mtime_ns,
            "digest": None, "algorithm": None, "placed": placed, "link": link}


def _record_on_file(final: Path, data: bytes) -> bool:
    """Keep the record as an extended attribute of the file just placed: no inode, open and
    close of a record file per file (a run of thousands of small files). Only where the
    filesystem takes user attributes, and only when the file has none yet (a hard link
    shared with another cache keeps that cache's record: this one goes to ``records_dir``)."""
    try:
        os.setxattr(final, _XATTR, data, os.XATTR_CREATE, follow_symlinks=False)
    except (OSError, AttributeError):  # no xattrs here (or not on this platform), or one is there
        return False
    return True


def read_completion(records_dir: Path, final: Path, st: os.stat_result | None = None) -> dict | None:
    """The completion record of ``final``: its attribute when it names ``final``, else its file
    in ``records_dir``; with ``st``, the first of the two that also names that inode, size and
    mtime (an attribute left from an earlier placement of the same inode does not hide a newer
    record in ``records_dir``). None when there is none or it is unreadable."""
    for record in _records(records_dir, final, st):
        if st is None or _names(record, final, st):
            return record
    return None


def _others_may_write(st: os.stat_result) -> bool:
    """Whoever may write a file may set its ``user.*`` attributes: on a file of another user, or
    one with a group or world write bit (a team's cache after ``chmod -R g+w``), an attribute could
    name changed bytes' new size and mtime. Such a file's record is kept in ``records_dir`` (the
    owner's own state dir) and only there is it trusted."""
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)) or safefs.is_foreign(st)


def _records(records_dir: Path, final: Path, st: os.stat_result | None = None):
    """The records that may be ``final``'s, in the order they are trusted: attribute (not on a
    file others may write), then file."""
    try:
        if _others_may_write(st or os.lstat(final)):
            raise PermissionError
        record = _from_attribute(os.getxattr(final, _XATTR, follow_symlinks=False), str(final.absolute()))
    except (OSError, AttributeError):  # no attribute (or no xattrs here), or not one to trust
        record = None
    if record is not None:
        yield record
    try:
        raw = safefs.read_bytes(completion_path(records_dir, final))
        record = _loads(raw) if raw else None
    except (OSError, ValueError, RecursionError, safefs.UnsafePathError):
        return
    if isinstance(record, dict):
        yield record


def _names(record: dict, final: Path, st: os.stat_result) -> bool:
    want = (str(final.absolute()), st.st_size, st.st_dev, st.st_ino, st.st_mtime_ns)
    return tuple(record.get(k) for k in ("path", "size", "dev", "ino", "mtime_ns")) == want


def from_other_link(record: dict | None, plan: FilePlan) -> bool:
    """``record`` (the final path's) says its file came from another link than ``plan``'s URL
    (``FilePlan.by_link``; a record that names no link, of an earlier version, says nothing)."""
    link = record.get("link") if record is not None and plan.by_link else None
    return isinstance(link, str) and not same_link(link, plan.spec.url)


def other_version(record: dict | None, plan: FilePlan) -> bool:
    """``record`` (the final path's) is not of ``plan``'s version of the file (``FilePlan.version``):
    it names another, or none (placed before the source's version was known)."""
    return plan.version is not None and (record is None or record.get("version") != plan.version)


def completion_matches(records_dir: Path, final: Path, st: os.stat_result) -> bool:
    if safefs.is_foreign(st) or not stat.S_ISREG(st.st_mode):
        return False
    return read_completion(records_dir, final, st) is not None
