"""One Hub repo into the Hugging Face cache: list, reuse blobs, transfer, verify, link, ref.

The flow for ``hf://ORG/NAME@REV``: ask the Hub for the commit and the file tree;
keep the files ``--include``/``--exclude`` select; for each distinct blob, reuse
``blobs/<etag>`` when it is there (whoever downloaded it, prefetch or
huggingface_hub), else transfer it with prefetch's engine into ``blobs/<etag>.part``
(several connections, resume state beside it, ``If-Range`` across runs), verify it
(LFS: sha256; other files: size and git blob sha1), rename it to ``blobs/<etag>``,
then link ``snapshots/<commit>/<path>`` to it. ``refs/<REV>`` is written last, once
every selected file is in place, so huggingface_hub's offline lookups by branch name
only ever see a complete snapshot.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Sequence

from prefetch.errors import (ExitCode, HashMismatchError, HTTPStatusError, InterruptedTransferError, NetworkError,
                             PrefetchError, UsageError)
from prefetch.model.events import Event, EventKind, EventSink, ignore_event
from prefetch.model.plans import FileResult
from prefetch.fs import safefs
from prefetch.fs.files import local_error
from prefetch.hf import api, cache_layout, complete
from prefetch.hf.names import hub_token
from prefetch.hf.plan import HubPlan, select_files
from prefetch.hf.blob_lock import blob_lock
from prefetch.hf.repo_progress import RepoProgress
from prefetch.fs.locks import hold_lock
from prefetch.engine.options import TransferOptions
from prefetch.engine.transfer import download_to_part
from prefetch.fs.hashing import update_from_file


def git_blob_sha1(path: Path, size: int) -> str:
    """The git blob id of a file: ``sha1(b"blob <size>\\0" + content)``."""
    hasher = hashlib.sha1(f"blob {size}\0".encode())
    update_from_file(hasher, path, 0, None)
    return hasher.hexdigest()


def fetch_repo(
    plan: HubPlan,
    *,
    transfer: TransferOptions,
    state: Path,
    env: Mapping[str, str] | None = None,
    on_event: EventSink = ignore_event,
    stop: threading.Event | None = None,
    job: str | None = None,
    max_parallel_files: int | None = None,
    lock_timeout: float = 6 * 3600.0,
    force: bool = False,
) -> list[FileResult]:
    """Make ``plan``'s repo (the selected files) complete in the cache; one result per file, then the repo's.

    ``force``: download every selected blob again (replacing it atomically) even if present.

    Raises:
        HubAccessError / NetworkError: the Hub refused or could not be reached for the listing.
        UsageError: no file matches the patterns.
    """
    env = os.environ if env is None else env
    stop = stop or threading.Event()
    if transfer.hosts is None:  # one repo on its own: its files still share connections
        from prefetch.engine.many import shared_hosts

        transfer, hosts = shared_hosts(transfer, on_event, stop)
        try:
            return fetch_repo(plan, transfer=transfer, state=state, env=env, on_event=on_event, stop=stop, job=job,
                              max_parallel_files=max_parallel_files, lock_timeout=lock_timeout, force=force)
        finally:
            hosts.close()
    started = time.monotonic()
    token = hub_token(env)
    factory = api.client_factory(plan.endpoint, token)
    client = factory(timeouts=transfer.timeouts)
    manifest = plan.manifest or complete.manifest_path(state, plan.repo_dir, plan.repo.revision, plan.include,
                                                       plan.exclude)
    try:
        backoff = (transfer.backoff_base, min(transfer.backoff_cap, 8.0))  # PREFETCH_BACKOFF tunes the API too
        commit = api.repo_commit(client, plan.endpoint, plan.repo, token=bool(token), backoff=backoff)
        files = api.list_files(client, plan.endpoint, plan.repo, commit, token=bool(token), backoff=backoff,
                               max_files=api.max_listed_files(env))
    except NetworkError as exc:
        # Only when the Hub cannot be reached: a refusal or a 404 is the Hub's answer, not its absence.
        local = None if force or isinstance(exc, (api.HubAccessError, HTTPStatusError)) else (
            complete.complete_locally(manifest, plan.repo_dir))
        if local is None:
            raise
        return complete.offline_results(plan, local, exc, on_event, started)
    finally:
        client.close()
    cache_layout.check_tree([f.path for f in files], label=plan.label)  # each path, then the pairs
    chosen = select_files(files, include=plan.include, exclude=plan.exclude)
    if len(chosen) == len(files):
        # As huggingface_hub does once it has listed them; not for a selection, which huggingface_hub's
        # offline snapshot_download would then call incomplete (a folder prefetch placed for it to read).
        cache_layout.write_tree(plan.repo_dir, commit, files)
    if not chosen:
        patterns = " ".join([*(f"--include {p}" for p in plan.include), *(f"--exclude {p}" for p in plan.exclude)])
        raise UsageError(f"{plan.label}: no file of its {len(files)} matches {patterns or 'the selection'}")
    repo_dir = plan.repo_dir
    by_blob: dict[str, list[api.HubFile]] = {}
    for f in chosen:
        by_blob.setdefault(f.etag, []).append(f)
    progress = RepoProgress(plan.label, sum(group[0].size for group in by_blob.values()), on_event)
    progress.start()
    missing = [group[0] for group in by_blob.values() if force or not _blob_ok(
        cache_layout.blob_path(repo_dir, group[0].etag), group[0])]
    copies = plan.copies(missing, progress.emit, label=plan.label, timeouts=transfer.timeouts) if (
        plan.copies and missing) else {}
    ctx = _BlobContext(plan=plan, commit=commit, transfer=transfer, factory=factory, locks=state / "locks",
                       stop=stop, job=job, lock_timeout=lock_timeout, progress=progress, force=force,
                       copies=copies)
    outcomes: dict[str, FileResult | PrefetchError] = {}

    def run(etag: str) -> None:
        try:
            if stop.is_set():
                raise InterruptedTransferError(f"{plan.label}: stopped before {by_blob[etag][0].path}")
            outcomes[etag] = _fetch_blob(ctx, by_blob[etag])
        except PrefetchError as exc:
            outcomes[etag] = exc
            progress.emit(Event(EventKind.FAILED, _file_label(plan, by_blob[etag][0]), message=str(exc),
                                exit_code=int(exc.exit_code)))
            if exc.exit_code == ExitCode.INTERRUPTED:
                stop.set()

    # Small files first: the config and tokenizer are in place within seconds. The files share
    # the engine's scheduler and one connection budget per host with the run's other files.
    from prefetch.engine.many import files_in_flight, run_in_order

    order = sorted(by_blob, key=lambda e: by_blob[e][0].size)
    workers = files_in_flight(len(order), limit=max_parallel_files, host_connections=transfer.host_connections)
    hosts = transfer.hosts
    run_in_order(len(order), lambda i: run(order[i]), stop=stop, workers=workers,
                 limit=(lambda busy: hosts.files_now(workers, busy)) if hosts is not None else None)
    results: list[FileResult] = []
    for etag in order:
        outcome = outcomes[etag]
        for f in by_blob[etag]:
            if isinstance(outcome, PrefetchError):
                results.append(_failed(plan, f, outcome, repo_dir, commit))
            else:
                results.append(_with_path(outcome, plan, f, repo_dir, commit))
    failed = [r for r in results if r.status in ("failed", "interrupted")]
    summary = FileResult(dataset=plan.label, name=plan.label,
                         path=str(cache_layout.snapshot_dir(repo_dir, commit)),
                         paths=[str(cache_layout.snapshot_dir(repo_dir, commit))],
                         size=progress.total, elapsed=time.monotonic() - started,
                         downloaded=sum(r.downloaded for r in results), reused=sum(r.reused for r in results),
                         algorithm="sha256/git-sha1", verified=not failed)
    if failed:
        first = next((r for r in failed if r.exit_code != int(ExitCode.INTERRUPTED)), failed[0])
        summary.status = first.status
        summary.exit_code = first.exit_code
        summary.error = f"{plan.label}: {len(failed)} of {len(results)} file(s) not in place; first: {first.error}"
        return [*results, summary]
    cache_layout.write_ref(repo_dir, plan.repo.revision, commit)
    complete.record_complete(manifest, commit=commit, files=[f for group in by_blob.values() for f in group])
    summary.status = "downloaded" if any(r.status == "downloaded" for r in results) else "cached"
    kind = EventKind.DONE if summary.status == "downloaded" else EventKind.CACHED
    rate = summary.downloaded / summary.elapsed if summary.elapsed > 0 else 0.0
    progress.emit(Event(kind, plan.label, done=progress.total, total=progress.total, elapsed=summary.elapsed,
                        rate=rate, message=f"{len(results)} file(s) verified -> {summary.path}"))
    return [*results, summary]


@dataclass
class _BlobContext:
    plan: HubPlan
    commit: str
    transfer: TransferOptions
    factory: type
    locks: Path
    stop: threading.Event
    job: str | None
    lock_timeout: float
    progress: "RepoProgress"
    force: bool = False
    copies: Mapping[str, Sequence[str]] = field(default_factory=dict)  # sha256 -> more URLs (``HubPlan.copies``)


def _file_label(plan: HubPlan, f: api.HubFile) -> str:
    return f"{plan.repo.repo_id}/{f.path}"


def _fetch_blob(ctx: _BlobContext, group: list[api.HubFile]) -> FileResult:
    """One blob (shared by the files in ``group``) complete and verified, then their snapshot links."""
    plan, first = ctx.plan, group[0]
    label = _file_label(plan, first)
    repo_dir = plan.repo_dir
    blob = cache_layout.blob_path(repo_dir, first.etag)
    result = FileResult(dataset=plan.label, name=label, path=str(blob), paths=[str(blob)], size=first.size,
                        algorithm="sha256" if first.sha256 else "git-sha1", digest=first.etag)
    started = time.monotonic()
    if ctx.force or not _blob_ok(blob, first):
        cache_layout.make_dirs(blob.parent)

        def waiting(owner) -> None:
            who = owner.describe() if owner else "another process"
            ctx.progress.emit(Event(EventKind.NOTE, label, message=f"waiting for {who}, which is downloading this file"))

        with hold_lock(ctx.locks, blob, timeout=ctx.lock_timeout, job=ctx.job, on_wait=waiting, stop=ctx.stop), \
                blob_lock(cache_layout.hf_lock_path(plan.root, plan.repo.folder, first.etag), ctx, label):
            if ctx.force or not _blob_ok(blob, first):  # someone may have finished it while we waited
                safefs.check_replaceable(blob)  # a planted link or another user's file: refused before any byte
                _download_blob(ctx, first, blob, label, result)
    if result.status != "downloaded":
        result.status = "cached"
        _drop_stale_partial(ctx, blob)
        ctx.progress.finish_file(label, first.size)
        ctx.progress.emit(Event(EventKind.CACHED, label, done=first.size, total=first.size, message=str(blob)))
    for f in group:
        cache_layout.link_snapshot(repo_dir, ctx.commit, f.path, f.etag)
    result.verified = True
    result.elapsed = time.monotonic() - started
    return result


def _drop_stale_partial(ctx: _BlobContext, blob: Path) -> None:
    """A ``.part`` left for a blob that is now complete (huggingface_hub finished it meanwhile): remove it."""
    part, state = blob.with_name(blob.name + ".part"), blob.with_name(blob.name + ".part.json")
    if not (os.path.lexists(part) or os.path.lexists(state)):
        return
    from prefetch.errors import LockTimeoutError

    try:
        with hold_lock(ctx.locks, blob, timeout=0):
            _discard(part, state)
    except (LockTimeoutError, PrefetchError):
        pass  # a download of it is running: it will find the blob and finish


def _blob_ok(blob: Path, f: api.HubFile) -> bool:
    """Is ``blob`` complete? Ours is trusted by name and size (its name is its hash; both tools rename
    only verified files); another user's (a shared cache) only when its bytes match its name.

    Only a regular file: neither tool makes a blob a link, so a link there was planted and is never read through.
    """
    st = safefs.lstat_or_none(blob)
    if st is None or not stat.S_ISREG(st.st_mode) or st.st_size != f.size:
        return False
    if not safefs.is_foreign(st):
        return True
    return _foreign_blob_matches(str(blob), st.st_ino, st.st_mtime_ns, f.size, f.sha256 or "", f.oid)


@functools.lru_cache(maxsize=1024)
def _foreign_blob_matches(path: str, ino: int, mtime_ns: int, size: int, sha256: str, oid: str) -> bool:
    """Another user's blob hashed once per run (keyed by its identity): does it hold what its name says?"""
    from prefetch.fs.hashing import hash_file

    try:
        if sha256:
            return hash_file(path, "sha256") == sha256
        return git_blob_sha1(Path(path), size) == oid
    except OSError:
        return False


def _download_blob(ctx: _BlobContext, f: api.HubFile, blob: Path, label: str, result: FileResult) -> None:
    """Transfer ``f`` into ``blob.part``, verify it, rename it to ``blob``."""
    part = blob.with_name(blob.name + ".part")
    state = blob.with_name(blob.name + ".part.json")
    url = api.resolve_url(ctx.plan.endpoint, ctx.plan.repo, ctx.commit, f.path)
    algorithm = "sha256" if f.sha256 else None
    sink = ctx.progress.file_sink(label)
    copies = list(ctx.copies.get(f.sha256, ())) if f.sha256 else []
    for attempt in (1, 2):
        try:
            # Renamed right after: a small blob needs no resume record (engine/resume_state.py).
            transfer = download_to_part(urls=[url, *copies], part=part, state_file=state, algorithm=algorithm,
                                        options=replace(ctx.transfer, small_record=False), on_event=sink,
                                        stop=ctx.stop,
                                        client_factory=ctx.factory, name=label, size_hint=f.size)
        except PrefetchError:
            from prefetch.engine.resume_state import load_state

            saved = load_state(state)
            if saved is None or not saved.done:
                _discard(part, state)
            raise
        result.downloaded += transfer.downloaded
        result.reused = transfer.reused
        got, expected, what = _digest(f, part, transfer)
        if got == expected and transfer.size == f.size:
            break
        _discard(part, state)
        if copies and attempt == 1:
            sink(Event(EventKind.NOTE, label, message=f"{what} mismatch with bytes from {len(copies)} other "
                                                      "source(s) (--lfs-from); downloading it again from the Hub alone"))
            copies = []
            continue
        if transfer.reused and attempt == 1:
            sink(Event(EventKind.NOTE, label, message=f"{what} mismatch after resuming {transfer.reused} bytes "
                                                      "from an earlier run; downloading the whole file again"))
            continue
        raise HashMismatchError(
            f"{label}: {what} mismatch: the Hub lists {expected} ({f.size} bytes), the download has {got}"
            f" ({transfer.size} bytes); nothing was placed. Try again, or another --mirror"
        )
    sink(Event(EventKind.VERIFY, label, done=f.size, total=f.size, message=f"{what} ok"))
    try:
        safefs.replace(part, blob)  # never over a link or another user's file
    except OSError as exc:
        raise local_error(exc, blob) from None
    _discard(state)
    result.status = "downloaded"
    ctx.progress.finish_file(label, f.size)
    rate = transfer.downloaded / transfer.elapsed if transfer.elapsed > 0 else 0.0
    sink(Event(EventKind.DONE, label, done=f.size, total=f.size, rate=rate, elapsed=transfer.elapsed,
               message=f"{what} ok -> {blob}"))


def _digest(f: api.HubFile, part: Path, transfer) -> tuple[str, str, str]:
    if f.sha256:
        return (transfer.digest or "").lower(), f.sha256, "sha256"
    return git_blob_sha1(part, transfer.size), f.oid, "git blob sha1"


def _with_path(result: FileResult, plan: HubPlan, f: api.HubFile, repo_dir: Path, commit: str) -> FileResult:
    from dataclasses import replace

    pointer = str(cache_layout.pointer_path(repo_dir, commit, f.path))
    return replace(result, name=_file_label(plan, f), path=pointer, paths=[pointer])


def _failed(plan: HubPlan, f: api.HubFile, exc: PrefetchError, repo_dir: Path, commit: str) -> FileResult:
    pointer = str(cache_layout.pointer_path(repo_dir, commit, f.path))
    return FileResult(dataset=plan.label, name=_file_label(plan, f), path=pointer, paths=[pointer],
                      status="interrupted" if exc.exit_code == ExitCode.INTERRUPTED else "failed",
                      error=str(exc), exit_code=int(exc.exit_code))


def _discard(*paths: Path) -> None:
    """Remove our own in-flight files; another user's entry of that name is left alone."""
    for p in paths:
        try:
            safefs.remove_own(p)
        except OSError:
            pass


def run_hub_plans(plans: Sequence[HubPlan], *, transfer: TransferOptions, state: Path, env: Mapping[str, str],
                  on_event: EventSink = ignore_event, stop: threading.Event | None = None,
                  job: str | None = None, force: bool = False) -> list[FileResult]:
    """Fetch each repo in turn; a repo that fails as a whole (refused, unreachable) gives one failed result."""
    stop = stop or threading.Event()
    results: list[FileResult] = []
    for plan in plans:
        try:
            if stop.is_set():
                raise InterruptedTransferError(f"{plan.label}: not started (stopped)")
            def waiting(owner, plan=plan) -> None:
                who = owner.describe() if owner else "another process"
                on_event(Event(EventKind.NOTE, plan.label, message=f"waiting for {who}, which is downloading this repo"))

            # The repo's lock: `prefetch rm` leaves a repo alone while it is being fetched.
            with hold_lock(state / "locks", plan.repo_dir, timeout=6 * 3600.0, job=job, on_wait=waiting, stop=stop):
                results.extend(fetch_repo(plan, transfer=transfer, state=state, env=env, on_event=on_event,
                                          stop=stop, job=job, force=force))
        except PrefetchError as exc:
            on_event(Event(EventKind.FAILED, plan.label, message=str(exc), exit_code=int(exc.exit_code)))
            results.append(FileResult(dataset=plan.label, name=plan.label, path=str(plan.repo_dir),
                                      paths=[str(plan.repo_dir)],
                                      status="interrupted" if exc.exit_code == ExitCode.INTERRUPTED else "failed",
                                      error=str(exc), exit_code=int(exc.exit_code)))
    return results
