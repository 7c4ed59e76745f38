"""The flow of one file: plan -> lock -> transfer -> verify -> extract -> place.

Each stage is a plain function of its inputs; none prints. The foreground CLI
and the background worker are two drivers of ``fetch_files``.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

from prefetch.errors import ExitCode, LocalFileError, PrefetchError
from prefetch.model.events import Event, EventKind, EventSink, ignore_event
from prefetch.net.urls import redact_url
from prefetch.cache.layout import part_path, state_path
from prefetch.cache import placement
from prefetch.fs.beside_locks import beside_lock, claim_part, wait_for_part_writer
from prefetch.fs.locks import hold_lock
from prefetch.fs.safefs import check_owned, lstat_or_none
from prefetch.model.specs import FileSpec
from prefetch.engine.transfer import download_to_part
from prefetch.fs.hashing import check_hash, first_mismatch
from prefetch.flow.options import FetchOptions
from prefetch.model.plans import FilePlan, FileResult
from prefetch.flow.leftovers import LeftoverScan, remove_leftovers
from prefetch.flow.place_extras import place_extras
from prefetch.flow.partials import check_size, drop_empty_partial, drop_unverifiable_partial


def source_urls(spec: FileSpec, options: FetchOptions, *, explicit_url: bool = False) -> list[str]:
    """The URLs to fetch ``spec`` from: mirrors first, then the origin and its documented copies.

    Dataset mirrors serve registry datasets by file name; a URL the user typed is
    fetched from that URL (``PREFETCH_DATASET_MIRROR`` never replaces it), unless
    ``--mirror`` was given on that command line (``options.url_mirrors``). With ``--seed``, a
    typed URL whose file has an expected hash is read from the team store first (the store
    is flat, by file name: the hash tells its object apart from another host's file of that
    name; without one the URL alone is the source).
    """
    if explicit_url and not options.url_mirrors:
        seed = getattr(options.sources, "seed", None)
        if seed is None or spec.expected is None:
            return list(spec.urls)
        return list(dict.fromkeys([_join(seed, spec.name), *spec.urls]))
    urls = [_join(m, spec.name) for m in options.mirrors]
    if options.use_origin or not urls:
        urls.extend(spec.urls)
    return list(dict.fromkeys(urls))


def _join(base: str, name: str) -> str:
    if base[:5].lower() == "s3://":  # an object URL names its key raw (store.s3.split_object_url)
        return base.rstrip("/") + "/" + name
    return base.rstrip("/") + "/" + quote(name)


def fetch_file(
    plan: FilePlan,
    *,
    options: FetchOptions,
    locks_dir: Path,
    markers_dir: Path,
    records_dir: Path | None = None,
    on_event: EventSink = ignore_event,
    stop: threading.Event | None = None,
    leftovers: LeftoverScan | None = None,
) -> FileResult:
    """Make ``plan`` true on disk: verified file(s) in place, archives extracted.

    ``leftovers``: the run's directory listings, shared by its files (one per call if None).

    Raises:
        PrefetchError subclasses (network 3, integrity 4, filesystem 5, archive 6, interrupted 7).
    """
    stop = stop or threading.Event()
    result = FileResult(
        dataset=plan.dataset,
        name=plan.label,
        path=str(plan.final),
        paths=[str(p) for p in plan.paths],
    )
    started = time.monotonic()
    records_dir = records_dir if records_dir is not None else markers_dir.parent / "placed"
    if leftovers is not None:
        leftovers.make_dirs(plan.final.parent, private=plan.private)
    else:
        placement.make_dirs(plan.final.parent, private=plan.private)

    def waiting(owner) -> None:
        who = owner.describe() if owner else "another process"
        on_event(Event(EventKind.NOTE, plan.label, message=f"waiting for {who}, which is downloading this file"))

    def waiting_beside(holder) -> None:
        on_event(Event(EventKind.NOTE, plan.label, message=f"waiting for {holder.describe()}, which is downloading "
                                                           "this file"))

    # The state dir's lock (this home's processes), then the one beside the file (every home's
    # and user's: fs/beside_locks.py), always in that order.
    beside = beside_lock(plan.final, timeout=options.lock_timeout, stop=stop, on_wait=waiting_beside, job=options.job)
    with hold_lock(locks_dir, plan.final, timeout=options.lock_timeout, job=options.job, on_wait=waiting, stop=stop), \
            beside:
        wait_for_part_writer(os.fspath(plan.final) + ".part", timeout=options.lock_timeout, stop=stop,
                             on_wait=lambda: on_event(Event(EventKind.NOTE, plan.label, message="waiting for another "
                                                            "run, which is writing this file's .part")))
        there = lstat_or_none(plan.final)  # (one look at the final path, under the lock, for both checks)
        if there is not None and stat.S_ISDIR(there.st_mode):
            # e.g. a URL ending in "/..": the "file" would be a directory, never a download.
            raise LocalFileError(f"{plan.final} is a directory, not a file; for a URL give -o PATH with a file name")
        part, state = part_path(plan.final), state_path(plan.final)
        remove_leftovers(plan, locks_dir=locks_dir, lock_timeout=options.lock_timeout, scan=leftovers, state=state)
        expected = plan.spec.expected
        adopted = False
        if not options.force and (placement.existing_is_good(plan, records_dir, on_event, lst=there)
                                  or (adopted := placement.adopt_copy(plan, on_event))):
            if adopted:  # prefetch made this name: recorded, so `rm` knows it is its own
                placement.write_completion(records_dir, plan, _Adopted(expected.hexdigest))
            place_extras(plan, plan.final, markers_dir, on_event, result,
                          locks_dir=locks_dir, lock_timeout=options.lock_timeout, stop=stop,
                          sync=options.transfer.sync_data)
            _note_shared(plan, records_dir)
            result.status = "cached"
            result.size = plan.final.stat().st_size
            result.verified = expected is not None
            result.algorithm = expected.algorithm if expected else None
            result.digest = expected.hexdigest if expected else None
            result.elapsed = time.monotonic() - started
            on_event(Event(EventKind.CACHED, plan.label, done=result.size, total=result.size, message=str(plan.final)))
            return result
        if there is not None:  # to be replaced by the download: refused now, not after its last byte
            check_owned(plan.final, there)  # (a link pointing nowhere, another user's file: placement refuses)
        # Hash only when there is something to check: hashing costs CPU that a
        # 2-core notebook needs for the transfer itself.
        algorithm = expected.algorithm if expected else None
        transfer, checked = _download_verified(plan, part, state, options=options, on_event=on_event, stop=stop,
                                               result=result, claim=beside.fd is not None)
        result.size = transfer.size
        result.algorithm = algorithm
        result.digest = transfer.digest
        result.verified = expected is not None
        on_event(
            Event(
                EventKind.VERIFY,
                plan.label,
                done=transfer.size,
                total=transfer.size,
                message=f"{algorithm} ok" if expected else "not verified: no expected hash (give --sha256 to check)",
            )
        )
        try:
            place_extras(plan, part, markers_dir, on_event, result,
                          locks_dir=locks_dir, lock_timeout=options.lock_timeout, stop=stop,
                          sync=options.transfer.sync_data)
        except PrefetchError as exc:
            if exc.exit_code == ExitCode.INTERRUPTED:  # (the archive's own name: its .part is kept)
                raise type(exc)(f"{plan.label}: extraction stopped; the archive is kept, complete: run the same "
                                "command again to extract it") from None
            if exc.exit_code == ExitCode.UNSAFE_ARCHIVE:
                placement.discard(part, state)
            elif exc.exit_code == ExitCode.INTEGRITY and expected is None:
                # A corrupt or truncated archive that no hash vouches for: its bytes are not
                # kept as "complete", so the same command downloads it again (the origin may
                # have been fixed) instead of failing on the same bytes forever.
                placement.discard(part, state)
                message = str(exc).replace("delete it and download it again.", "").rstrip()
                message = message[:-1] + "." if message.endswith(";") else message
                raise type(exc)(f"{message} The download was not kept (no expected hash to vouch for it): the "
                                f"same command downloads it again") from None
            raise
        placement.rename(part, plan.final)
        placement.discard(state)
        # (the .part's stat that _check_size took: the same inode, size and mtime, renamed)
        placement.write_completion(records_dir, plan, transfer, st=checked)
        _note_shared(plan, records_dir)
        result.status = "downloaded"
        result.elapsed = time.monotonic() - started
        rate = transfer.downloaded / transfer.elapsed if transfer.elapsed > 0 else 0.0
        on_event(
            Event(
                EventKind.DONE,
                plan.label,
                done=transfer.size,
                total=transfer.size,
                rate=rate,
                elapsed=result.elapsed,
                message=f"{algorithm + ' ok' if expected else 'unverified'}, {describe_sources(transfer.served)} "
                f"-> {plan.final}",
            )
        )
        return result


class _Adopted:
    """What ``write_completion`` reads of a transfer, for a file linked from another cache."""

    def __init__(self, digest: str) -> None:
        self.digest = digest


_NO_RECORD: list = [(None, None)]  # (options, the same without small records): a replace() per file cost 2% of it


def _without_small_record(transfer_options):
    cached, made = _NO_RECORD[0]  # (one tuple, swapped whole: threads share it)
    if cached is not transfer_options:
        made = replace(transfer_options, small_record=False)
        _NO_RECORD[0] = (transfer_options, made)
    return made


def forget_transfer(transfer_options) -> None:
    """The run that used ``transfer_options`` ended: the cache above lets go of them (they reach the
    run's hosts and its event sinks: a caller's callback, a stream's feed, a progress bar)."""
    if _NO_RECORD[0][0] is transfer_options:
        _NO_RECORD[0] = (None, None)


def _note_shared(plan: FilePlan, records_dir: Path) -> None:
    """A file another cache's dataset shares: note where it is, so that cache links it."""
    if plan.shares:
        from prefetch.cache.copies import note_copy

        note_copy(records_dir.parent, plan.shares, plan.final)


def _download_verified(plan: FilePlan, part: Path, state: Path, *, options: FetchOptions, on_event: EventSink,
                       stop: threading.Event, result: FileResult, claim: bool = False):
    """Download ``plan`` into ``part`` until its hash matches (adds to ``result``'s counters).

    ``claim``: the lock beside the file is held: the ``.part`` is made this run's own first
    (``fs.beside_locks.claim_part``: a bulk lane's empty one of another user removed).

    A mismatch is retried once from scratch when bytes from an earlier run were
    reused, then from each source alone (the origin first) when there are several.

    Raises:
        HashMismatchError: no source gives the expected bytes.
    """
    expected = plan.spec.expected
    algorithm = expected.algorithm if expected else None
    urls = source_urls(plan.spec, options, explicit_url=plan.explicit_url)
    if options.sources is not None:  # s3:// objects -> URLs the engine can GET (absent ones left out)
        urls = options.sources.resolve(plan, urls, state=state, on_event=on_event, stop=stop)
        if not urls:
            from prefetch.errors import NetworkError

            raise NetworkError(f"{plan.label}: the store does not have it and no other source was given"
                               " (add --also-origin, or --seed to fetch it elsewhere and upload it)")
    # Nothing from an earlier run (a list of new files): no record to read, nor for the engine to look for.
    fresh = lstat_or_none(part) is None and lstat_or_none(state) is None
    if expected is None and not fresh:
        drop_unverifiable_partial(part, state, plan.label, on_event)
    alone: list[str] | None = None  # after a hash mismatch: sources to try one by one
    first = _handed_answer(plan, options, urls, fresh)
    if claim:
        claim_part(os.fspath(part))
    transfer_options = options.transfer
    if not (plan.extract_into or plan.decompress_to or plan.also):
        # Placed right after the transfer: a small file needs no resume record (engine/resume_state.py).
        transfer_options = _without_small_record(transfer_options)
    while True:
        try:
            transfer = download_to_part(
                urls=urls,
                part=part,
                state_file=state,
                algorithm=algorithm,
                options=transfer_options,
                on_event=on_event,
                stop=stop,
                name=plan.label,
                client_factory=options.client_factory,
                size_hint=plan.spec.size,
                fresh=fresh,
                first=first,
            )
        except PrefetchError as exc:
            fresh = first = None  # (after an attempt the engine looks for itself)
            drop_empty_partial(part, state)
            fallback = options.sources.fallback(plan) if options.sources is not None else []
            if fallback and exc.exit_code == ExitCode.NETWORK:
                # The team store failed: the file's other sources take over.
                on_event(Event(EventKind.NOTE, plan.label,
                               message=f"{options.sources.relabel(exc)}; using the other sources"))
                urls = fallback
                continue
            if alone and exc.exit_code == ExitCode.NETWORK:
                # Trying sources one by one after a mismatch: an unreachable one is skipped.
                on_event(Event(EventKind.NOTE, plan.label, message=f"{exc}; trying {alone[0]} alone"))
                urls = [alone.pop(0)]
                continue
            if options.sources is not None:  # a store object by its s3:// name, not its presigned URL
                raise options.sources.relabel(exc)
            raise
        fresh = first = None
        result.downloaded += transfer.downloaded
        result.reused = transfer.reused
        result.sources_dropped += transfer.sources_dropped
        served = dict(transfer.served)
        if options.sources is not None:  # s3:// names instead of presigned URLs (signatures stay out of logs)
            served = {options.sources.label(u): n for u, n in served.items()}
        served = {redact_url(u): n for u, n in served.items()}
        result.sources = served
        result.source = max(served, key=served.get) if served else None
        size_ok = plan.spec.size is None or transfer.size == plan.spec.size
        wrong = None  # (a hash in another algorithm, an md5 beside the sha256, that the bytes do not match)
        if size_ok and (expected is None or expected.matches(transfer.digest)):
            wrong = first_mismatch(part, plan.spec.more_hashes)
            if wrong is None:
                return transfer, check_size(part, state, transfer.size, plan.label, ident=transfer.part_ident)
        mismatch = wrong[0].algorithm if wrong else expected.algorithm if expected else "size"
        placement.discard(part, state)
        if transfer.reused:
            # Bytes kept from an earlier run may be what is wrong (a server that sent
            # bad bytes then, a changed file without validators): one fresh try.
            on_event(
                Event(
                    EventKind.NOTE,
                    plan.label,
                    message=f"{mismatch} mismatch after resuming {transfer.reused} bytes "
                    f"from an earlier run; downloading the whole file again",
                )
            )
            continue
        fallback = options.sources.fallback(plan, wrong=True) if options.sources is not None else []
        if fallback:
            # The team store's copy is not the file (corrupt, or put there with a wrong hash):
            # the file's other sources take over, and --seed replaces the store's copy after.
            on_event(Event(EventKind.NOTE, plan.label, message=f"{mismatch} mismatch {describe_sources(served)}; "
                           "using the other sources"))
            urls = fallback
            continue
        if alone is None and len(urls) > 1:
            # Which source lied is unknown: try each one alone, the origin first.
            alone = sorted(urls, key=lambda u: u != plan.spec.url)
        if alone:
            on_event(
                Event(
                    EventKind.NOTE,
                    plan.label,
                    message=f"{mismatch} mismatch with {len(urls)} source(s); "
                    f"downloading again from {alone[0]} only",
                )
            )
            urls = [alone.pop(0)]
            continue
        if not size_ok:
            from prefetch.errors import HashMismatchError

            raise HashMismatchError(
                f"{plan.label}: got {transfer.size} bytes, expected {plan.spec.size} "
                f"({describe_sources(served)}); no source has the right file"
            )
        want, got = wrong if wrong else (expected, transfer.digest or "")
        check_hash(got, want, what=f"{plan.label} ({describe_sources(served)})")


def _handed_answer(plan: FilePlan, options: FetchOptions, urls: list[str], fresh: bool):
    """The answer to this file's first request that its ``--content-disposition`` name probe kept
    (``FetchOptions.handed``), for a fresh download from that URL alone; else None (and a kept
    one is given back: its request was for a download that does not happen so)."""
    got = options.handed.pop(plan.spec.url, None) if options.handed else None
    if got is None:
        return None
    host, handover = got
    hosts = options.transfer.hosts
    if fresh and urls == [plan.spec.url] and hosts is not None and hosts.host_for(urls[0]) is host:
        return handover
    handover.close()
    host.release()
    return None


def describe_sources(served: dict[str, int]) -> str:
    """Who delivered a file: ``from URL``, or ``from A (70%), B (30%)`` for several sources."""
    if not served:
        return "from the bytes already on disk"
    if len(served) == 1:
        return f"from {redact_url(next(iter(served)))}"
    total = sum(served.values()) or 1
    ranked = sorted(served.items(), key=lambda kv: -kv[1])
    return "from " + ", ".join(f"{redact_url(url)} ({100 * n / total:.0f}%)" for url, n in ranked)
