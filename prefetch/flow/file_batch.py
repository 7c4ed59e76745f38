"""The bulk lane's files: what ``files.fetch_file`` does for a fresh small file, for a chunk of them at once.

``file_list.fetch_files`` routes a run of fresh small files of one near host here in chunks
(:func:`eligible` says which; ``PREFETCH_BULK=0`` turns the lane off). Per file, as
``fetch_file`` does: its lock, taken without waiting (busy: the usual path); nothing at its
final name, ``.part``, state record or leftover temp names (anything there: the usual path,
which knows what to do with it); then its request goes out pipelined with the chunk's others
(``engine/bulk.py``). An accepted answer is written into a new ``.part`` (``O_EXCL``, never
through a link: ``fs/safefs.py``), hashed when a hash is expected, and checked against the
expected size and hash; a mismatch hands the file back (the usual path fetches it again and
fails it with its own words and exit code). Then ONE flush for the chunk's parts (``syncfs``
on their filesystem; an ``fdatasync`` per file where the parts are on several filesystems or
``syncfs`` is missing; none with ``TransferOptions.sync_data`` off): every ``.part`` is on
disk before any of them is renamed, the guarantee of the usual fdatasync-then-rename. Then
per file: rename, completion record, the usual events (START, VERIFY, DONE with the same
message) and ``FileResult``, lock released.

A file handed back has nothing written for it (no ``.part``, its lock released). A stop
(Ctrl-C, ``--fail-fast``) before the renames discards the chunk's parts: the files go back and
report "interrupted" as the usual path's files not started do.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from prefetch.cache import placement
from prefetch.cache.layout import part_path
from prefetch.engine import bulk
from prefetch.flow.file_looks import Looks
from prefetch.flow.partials import part_changed
from prefetch.fs.beside_locks import PARTS_HELD, lock_new_part, release_part
from prefetch.fs.files import rename_new, syncfs_call as _syncfs_call
from prefetch.fs.safefs import check_owned, lstat_or_none
from prefetch.model.events import Event, EventKind, EventSink
from prefetch.model.plans import FilePlan, FileResult
from prefetch.net.urls import redact_url
# (flow/files.py imports the engine's answer checks: both are loaded before a chunk, and a
# `from` import in a function costs 2-5 us each time, a few a file in a run of thousands)
from prefetch.engine.response_check import one_stream_note
from prefetch.flow.files import describe_sources, source_urls

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# (os.replace is os.rename with another flag; only os.rename is listed in supports_dir_fd: asking for
# os.replace there always said no, and every rename opened its folder again through safefs.replace)
_RELATIVE = hasattr(os, "O_DIRECTORY") and os.rename in os.supports_dir_fd


def eligible(plan: FilePlan, options, known: dict | None = None) -> str | None:
    """The one URL the lane would fetch ``plan`` from, or None: the usual path only (several
    sources, a team store, extraction, extra names, a custom client, not plain direct http).
    ``known``: the run's answers by host (``bulk.direct_url``)."""
    if (plan.extract_into or plan.decompress_to or plan.also or plan.shares or options.sources is not None
            or options.client_factory is not None or options.transfer.limiter is not None):
        return None
    urls = source_urls(plan.spec, options, explicit_url=plan.explicit_url)
    if len(urls) != 1 or not bulk.direct_url(urls[0], known):
        return None
    return urls[0]


def fetch_batch(chunk: list[tuple[int, FilePlan, str]], *, host, options, locks_dir: Path, records_dir: Path,
                on_event: EventSink, stop: threading.Event, leftovers,
                off_wire=None) -> tuple[dict[int, FileResult | Exception], list[int], list[int]]:
    """Fetch ``chunk`` (``(index, plan, url)``, all of ``host``): the results of the files placed
    (or the ``LocalFileError`` of one whose ``.part`` another process changed before its rename),
    the indexes handed back to the usual path, and those not asked for in the chunk's time
    (``bulk.CHUNK_SECONDS``: the caller offers them to the lane again); nothing is written for
    either, their locks are released.

    ``off_wire(all_asked, back)`` is called once the chunk is done with the host's connections
    (every answer read, the bodies in their ``.part``s, the connections given back), before its
    flush and renames: ``all_asked`` is False when some files were not asked for in the chunk's
    time, ``back`` the files handed back so far (their locks released; they are not returned
    again). The caller may start the host's next chunk then, and the files handed back: this
    chunk's flush (the disk's time, the interpreter lock free) and placing overlap them."""
    from prefetch.fs.locks import hold_lock

    held: dict[int, object] = {}
    writers: list[_Writer] = []
    back: list[int] = []
    jobs = []
    plans: dict[int, FilePlan] = {}
    urls: dict[int, str] = {}
    try:
        files: dict[str, int] = {}  # folder -> the chunk's files in it
        for index, plan, url in chunk:
            folder = os.path.dirname(os.fspath(plan.final))
            if stop.is_set() or (folder not in files and not _fresh_dir(plan, leftovers)):
                back.append(index)
                continue
            lock = hold_lock(locks_dir, plan.final, timeout=0, job=options.job)
            try:
                lock.__enter__()
            except Exception:  # noqa: BLE001 - busy (another process has it) or the locks dir fails: the usual path
                back.append(index)
                continue
            held[index] = lock
            files[folder] = files.get(folder, 0) + 1
        looks = Looks(leftovers, files)  # (each folder listed once, every lock of the chunk held)
        for index, plan, url in chunk:
            if index not in held:
                continue
            if not looks.nothing_there(plan):
                _release(held.pop(index))
                back.append(index)
                continue
            jobs.append((index, url, plan.label, plan.spec.expected is not None))
            plans[index] = plan
            urls[index] = url
        sync = options.transfer.sync_data
        one_fs = sync and _one_filesystem(plans.values())
        writer = _Writer(sync=sync and not one_fs)
        writers.append(writer)

        def take(job, head, answer) -> bool:
            writer.put(job[0], plans[job[0]], head, answer)
            return True

        broke = False
        unsent: set = set()
        try:
            if jobs:
                handed, unsent = bulk.fetch_pipelined(host, jobs, options=options.transfer, stop=stop, take=take,
                                                      first_refusal_ends=options.fail_fast)
                back.extend(job[0] for job in handed if job[0] not in unsent)
        except Exception:  # noqa: BLE001 - a bug: nothing of the chunk is kept, the usual path does it all
            broke = True
            unsent = set()
            back.extend(job[0] for job in jobs)
        finally:
            written = writer.finish()
        for index in [i for i, got in written.items() if got is None]:
            del written[index]  # (a wrong size or hash, or the .part could not be made: nothing left of it)
            back.append(index)
        if off_wire is not None:
            for index in back:  # (nothing written for them: their locks go now, their files the usual way)
                if index in held:
                    _release(held.pop(index))
            off_wire(not unsent, sorted(set(back)))
            back = []
        if written and (broke or stop.is_set() or (one_fs and not _syncfs(next(iter(plans.values())).final.parent,
                                                                   [plans[i] for i in written]))):
            for index in written:  # (stopped before any rename: nothing of the chunk is kept)
                placement.discard(part_path(plans[index].final))
                back.append(index)
            written.clear()
        results = {}
        folders = _Folders()
        try:
            for index, (head, answer, digest, st) in written.items():
                plan = plans[index]
                if stop.is_set():
                    # A stop meanwhile (--fail-fast: another file failed during the flush or these
                    # renames): nothing more is placed; the rest go back, as when stopped before.
                    placement.discard(part_path(plan.final))
                    back.append(index)
                    continue
                try:
                    changed = folders.rename(plan.final, st, plan.label)
                except Exception:  # noqa: BLE001 - the usual path meets it again and reports it its way
                    placement.discard(part_path(plan.final))
                    back.append(index)
                    continue
                if changed is not None:  # (another process's doing: not placed, the file fails as fetch_file's would)
                    results[index] = changed
                    continue
                results[index] = _placed(plan, records_dir, head, answer, digest, st, url=urls[index],
                                         on_event=on_event, elapsed=max(1e-6, head.elapsed))
        finally:
            folders.close()
        if results:
            host.given_up = False  # the host delivers files: its files get their retries again
        return results, sorted(set(back)), sorted(unsent)  # (a file once, whatever handed it back)
    finally:
        for writer in writers:
            writer.let_go()
        for lock in held.values():
            _release(lock)


class _Folders:
    """The chunk's folders, each opened once: a ``.part`` renamed to its final name relative to
    its folder's fd (``safefs.replace`` opens the folder for each rename), where nothing is at
    the final name (``fs.files.rename_new``), else once the final name is checked as there
    (ours and not a link)."""

    def __init__(self) -> None:
        self.fds: dict[str, int] = {}

    def rename(self, final: Path, st: os.stat_result, label: str):
        """Rename ``final``'s ``.part`` to ``final`` if it is still the file written (``st``: the
        writer's fstat), as ``flow/partials.check_size`` checks for the usual path; else the
        error its file fails with (nothing renamed): another process replaced the ``.part`` (left
        alone) or changed its size (discarded)."""
        if not _RELATIVE:
            changed = part_changed(part_path(final), os.stat(part_path(final), follow_symlinks=False), st, label)
            if changed is None:
                placement.rename(part_path(final), final)  # (no renames relative to a folder's fd here)
            return changed
        folder, name = os.path.split(os.fspath(final))
        fd = self.fds.get(folder)
        if fd is None:
            fd = self.fds[folder] = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        part = name + ".part"
        now = os.stat(part, dir_fd=fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino, now.st_size) != (st.st_dev, st.st_ino, st.st_size):
            return part_changed(part_path(final), now, st, label)
        if rename_new(part, name, fd):
            return None  # (nothing was at the final name, the usual case: renamed without a look first)
        try:  # (safefs.check_replaceable, relative to the folder's fd: absent, or ours and not a link)
            there = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            there = None
        if there is not None:
            check_owned(final, there)
        os.replace(part, name, src_dir_fd=fd, dst_dir_fd=fd)
        return None

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


class _Writer:
    """Writes a chunk's accepted bodies into their ``.part``s on a thread of its own: creating a
    new file is kernel time (0.15-0.3 ms a file on this machine's ext4), which then overlaps the
    lane's reading and parsing on the other core instead of adding to it."""

    def __init__(self, *, sync: bool) -> None:
        from queue import SimpleQueue

        self.sync = sync
        self.queue: SimpleQueue = SimpleQueue()
        self.done: dict[int, tuple | None] = {}
        self.parts: list[int] = []  # the .parts' descriptors, each flock'ed until the chunk is placed
        self.pending: list = []
        self.thread = threading.Thread(target=self._run, name="prefetch-bulk-writer", daemon=True)
        self.thread.start()

    BATCH = 16  # bodies handed to the thread at once: one wake-up (and interpreter-lock hand-off) each

    def put(self, index: int, plan: FilePlan, head, answer) -> None:
        self.pending.append((index, plan, head, answer))
        if len(self.pending) >= self.BATCH:
            self.queue.put(self.pending)
            self.pending = []

    def _run(self) -> None:
        while (items := self.queue.get()) is not None:
            for index, plan, head, answer in items:
                try:
                    got = _write_part(plan, head.body, sync=self.sync)
                except Exception:  # noqa: BLE001 - the usual path meets it again and reports it its way
                    got = None
                head.body = b""  # (written: the chunk does not keep its bodies in memory)
                if got is not None:
                    if len(self.parts) < PARTS_HELD:
                        self.parts.append(got[2])
                    else:  # (a small ulimit -n: the rest unlocked; the .part checks before the renames hold)
                        os.close(got[2])
                self.done[index] = None if got is None else (head, answer, got[0], got[1])

    def finish(self) -> dict[int, tuple | None]:
        """Every body written (or refused: None): index -> (head, answer, digest, the .part's stat)."""
        if self.pending:
            self.queue.put(self.pending)
            self.pending = []
        self.queue.put(None)
        self.thread.join()
        return self.done

    def let_go(self) -> None:
        """Close the ``.part``s' descriptors: their locks go (the chunk is placed, or given up)."""
        parts, self.parts = self.parts, []
        for fd in parts:
            release_part(fd)


def _release(lock) -> None:
    lock.__exit__(None, None, None)


def _fresh_dir(plan: FilePlan, leftovers) -> bool:
    """The file's folder exists (made once per run); False when it cannot be made (the usual path says why)."""
    try:
        leftovers.make_dirs(plan.final.parent, private=plan.private)
        return True
    except Exception:  # noqa: BLE001
        return False


def _write_part(plan: FilePlan, body: bytes, *, sync: bool):
    """``(digest, stat)`` of a new ``.part`` holding ``body`` when its size and hash are the
    expected ones; None (nothing left on disk) otherwise."""
    expected = plan.spec.expected
    if plan.spec.size is not None and plan.spec.size != len(body):
        return None
    digest = None
    if expected is not None:
        from prefetch.fs.hashing import bytes_match, new_hasher

        hasher = new_hasher(expected.algorithm)
        hasher.update(body)
        digest = hasher.hexdigest()
        if not expected.matches(digest) or not bytes_match(body, plan.spec.more_hashes):
            return None
    part = os.fspath(plan.final) + ".part"  # (part_path's name, without a Path a file)
    try:
        # A new name only (O_EXCL never follows a link nor opens what is there: a planted link,
        # FIFO or another user's file fails here), so a regular file of ours with one name.
        fd = os.open(part, _NEW, 0o644)
    except OSError:  # a name planted since the look, or the folder refuses: the usual path
        return None
    if not lock_new_part(fd, plan.final, part):  # (another run's: fs/beside_locks.py)
        return None
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fdatasync(fd)
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        placement.discard(part)
        return None
    return digest, st, fd  # (kept open, its flock held, until the chunk is placed: Writer.let_go)


def _one_filesystem(plans) -> bool:
    """All the parts' folders are on one filesystem (one ``syncfs`` flushes them), and syncfs exists."""
    if _syncfs_call() is None:
        return False
    devices = set()
    for folder in {os.path.dirname(plan.final) or "." for plan in plans}:  # (a list's files share a folder or a few)
        st = lstat_or_none(folder)
        if st is None:
            return False
        devices.add(st.st_dev)
    return len(devices) <= 1


def _syncfs(folder: Path, written: list[FilePlan]) -> bool:
    """Flush the filesystem of ``folder`` (the ``written`` files' parts with it); an ``fdatasync``
    per part when ``syncfs`` fails. False: not flushed (the parts are not kept)."""
    call = _syncfs_call()
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        fd = None
    if fd is not None:
        try:
            if call(fd) == 0:
                return True
        finally:
            os.close(fd)
    from prefetch.fs.safefs import open_file

    try:
        for plan in written:
            pfd = open_file(part_path(plan.final), os.O_RDONLY)
            try:
                os.fdatasync(pfd)
            finally:
                os.close(pfd)
    except Exception:  # noqa: BLE001
        return False
    return True


class _Done:
    """What ``write_completion`` reads of a transfer."""

    def __init__(self, digest: str | None) -> None:
        self.digest = digest


def _placed(plan: FilePlan, records_dir: Path, head, answer, digest, st, *, url: str, on_event: EventSink,
            elapsed: float) -> FileResult:
    """The file is in place: its record, its events and its result, as ``fetch_file`` gives them."""
    size = answer.total
    placement.write_completion(records_dir, plan, _Done(digest), st=st)
    expected = plan.spec.expected
    algorithm = expected.algorithm if expected else None
    label = plan.label
    on_event(Event(EventKind.START, label, done=0, total=None))
    if answer.note:
        on_event(Event(EventKind.NOTE, label, done=0, total=size, message=answer.note))
    if algorithm is None and not (answer.etag or answer.last_modified):
        on_event(Event(EventKind.NOTE, label, done=0, total=size, message=one_stream_note(url)))
    on_event(Event(EventKind.VERIFY, label, done=size, total=size,
                   message=f"{algorithm} ok" if expected else "not verified: no expected hash (give --sha256 to check)"))
    shown = redact_url(url)
    on_event(Event(EventKind.DONE, label, done=size, total=size, rate=size / elapsed, elapsed=elapsed,
                   message=f"{algorithm + ' ok' if expected else 'unverified'}, {describe_sources({url: size})} "
                   f"-> {plan.final}"))
    return FileResult(dataset=plan.dataset, name=label, path=str(plan.final), paths=[str(p) for p in plan.paths],
                      status="downloaded", size=size, algorithm=algorithm, digest=digest, verified=expected is not None,
                      downloaded=size, reused=0, sources={shown: size}, source=shown, elapsed=elapsed)
