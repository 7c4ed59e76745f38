"""What a verified download places besides its final name, before that name appears:
archives extracted, a gzip decompressed, the extra names linked or copied (``flow/files.py``
calls it once the file is verified, and again for a file found in place whose extras are not).
"""

from __future__ import annotations

import threading
from pathlib import Path

from prefetch.cache import placement
from prefetch.flow.leftovers import extraction_lock
from prefetch.model.events import Event, EventKind, EventSink
from prefetch.model.plans import FilePlan, FileResult


def place_extras(plan: FilePlan, data: Path, markers_dir: Path, on_event: EventSink, result: FileResult, *,
                  locks_dir: Path, lock_timeout: float, stop: threading.Event | None = None,
                  sync: bool = True) -> None:
    """Extract archives and create the extra names, before the final name appears.

    Keras treats the archive's presence as "done", so folders come first. A ``stop`` (Ctrl-C,
    `prefetch cancel`) during an extraction ends it within a member or a MiB: nothing of it is
    placed, the verified archive stays a complete ``.part`` for the next run to extract. With
    ``sync`` (``PREFETCH_SYNC``) what is extracted or decompressed is on disk before its name is,
    as a download's ``.part`` is: Keras and torchvision take a present name as complete.
    """
    for into in plan.extract_into:
        marker = placement.marker_path(markers_dir, plan.final, into)
        present = placement.extracted_entries(marker, into) if data == plan.final else []
        if not present and data == plan.final:  # another account's extraction in a folder not ours to write
            from prefetch.flow.foreign_tree import foreign_tree_entries

            present = foreign_tree_entries(plan, data, into)
        if present and plan.private and not placement.private_tree(into, present):
            present = []  # as nltk.download: a tree another account could write is installed again
        if present:
            result.extracted.extend(str(into / e) for e in present)
            continue
        from prefetch.archive.extract import extract_archive

        on_event(Event(EventKind.EXTRACT, plan.label, message=f"extracting into {into}"))
        with extraction_lock(locks_dir, into, timeout=lock_timeout):
            # a merge into entries already there: recorded, so `rm` never removes what it did not create
            before = placement.entries_before_merge(into, marker) if plan.extract_merge else set()
            extracted = extract_archive(data, into, protect=placement.own_paths(plan),
                                        verified=plan.spec.expected is not None, moves=plan.extract_moves,
                                        gunzip=plan.extract_gunzip, merge=plan.extract_merge,
                                        subfolder=plan.extract_subfolder, top=plan.extract_top,
                                        max_bytes=plan.extract_max_bytes, stop=stop, durable=sync,
                                        private=plan.private)
        placement.write_marker(marker, into, extracted.entries, merged=sorted(before & set(extracted.entries)))
        result.extracted.extend(str(into / e) for e in extracted.entries)
    for target in plan.decompress_to:
        _decompress(plan, data, target, markers_dir, on_event, result, sync=sync, stop=stop)
    for alias in plan.also:
        if data == plan.final and placement.same_file(alias, plan.final):
            continue
        placement.link_or_copy(data, alias)


def _decompress(plan: FilePlan, data: Path, target: Path, markers_dir: Path, on_event: EventSink,
                result: FileResult, *, sync: bool = True, stop: threading.Event | None = None) -> None:
    """``data`` (a gzip file) decompressed to ``target``, unless an earlier run already placed it;
    a ``stop`` ends it within a MiB, nothing of it placed (as an extraction)."""
    marker = placement.marker_path(markers_dir, plan.final, target)
    if not (data == plan.final and placement.extracted_entries(marker, target.parent) == [target.name]):
        from prefetch.archive.gunzip import decompress_gzip

        on_event(Event(EventKind.EXTRACT, plan.label, message=f"decompressing into {target}"))
        decompress_gzip(data, target, durable=sync, stop=stop)
        placement.write_marker(marker, target.parent, [target.name])
    result.extracted.append(str(target))
