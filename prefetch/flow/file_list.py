"""Many files at once: each through ``fetch_file``, on a bounded pool, one failure harming none.

The files of one run share the engine's hosts (one connection budget, the warm connections
and the route judgement per host: ``engine/hosts.py``); ``engine/many.py`` decides when
each starts. A stop (Ctrl-C, ``--fail-fast``) reaches every file; files not started yet
report "interrupted".
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from prefetch.errors import ExitCode, PrefetchError
from prefetch.model.events import Event, EventKind, EventSink, ignore_event
from prefetch.model.plans import FilePlan, FileResult
from prefetch.flow.files import fetch_file, forget_transfer
from prefetch.flow.options import FetchOptions
from prefetch.flow.leftovers import LeftoverScan


def fetch_files(
    plans: Sequence[FilePlan],
    *,
    options: FetchOptions,
    state: Path,
    on_event: EventSink = ignore_event,
    stop: threading.Event | None = None,
    before_start: Callable[[int], bool] | None = None,
    on_file_done: Callable[[int, FileResult], None] | None = None,
) -> list[FileResult]:
    """Fetch several files at once; one failure does not harm the others.

    ``state`` is prefetch's state dir: file locks go to ``state/locks``, records of
    past extractions to ``state/extracted``.

    Files start in the order of ``plans`` (they may finish in any order), as many at
    once as ``options.max_parallel_files`` says (default: a host's connection budget);
    they share one connection budget, the warm connections and the route judgement per
    host (``engine/hosts.py``). ``before_start(i)`` is called before file ``i`` starts
    (it may block); False leaves it "interrupted" (not started). ``on_file_done(i,
    result)`` is called once per file as soon as its result is final, from any thread.

    With ``options.fail_fast`` the first failure asks every other file to stop
    cleanly (their state is saved and they report "interrupted").
    """
    from prefetch.engine.many import files_in_flight, near_limit, run_in_order, shared_hosts

    stop = stop or threading.Event()
    results: list[FileResult | None] = [None] * len(plans)
    transfer, own_hosts = shared_hosts(options.transfer, on_event, stop)
    options = replace(options, transfer=transfer)

    def finish(index: int, result: FileResult) -> None:
        results[index] = result
        if on_file_done is not None:
            on_file_done(index, result)

    leftovers = LeftoverScan()  # each directory listed once for the whole run
    locks_dir, markers_dir, records_dir = state / "locks", state / "extracted", state / "placed"

    def run(index: int) -> None:
        plan = plans[index]
        got: list[FileResult] = []
        try:
            _run(index, plan, got)
        finally:  # one result per file, even when an event sink raised (that still propagates)
            if results[index] is None:
                finish(index, got[0] if got else _failed(plan, PrefetchError(f"{plan.label}: internal error")))

    def _run(index: int, plan: FilePlan, got: list[FileResult]) -> None:
        try:
            if stop.is_set():
                from prefetch.errors import InterruptedTransferError

                raise InterruptedTransferError(f"{plan.label}: not started (stopped)")
            result = fetch_file(
                plan, options=options, locks_dir=locks_dir, markers_dir=markers_dir,
                records_dir=records_dir, on_event=on_event, stop=stop, leftovers=leftovers,
            )
        except PrefetchError as exc:
            result = _failed(plan, exc)
            got.append(result)
            on_event(Event(EventKind.FAILED, plan.label, message=str(exc), exit_code=int(exc.exit_code)))
            if options.fail_fast or exc.exit_code == ExitCode.INTERRUPTED:
                stop.set()
        except Exception as exc:  # noqa: BLE001 - a bug: this file fails, the others go on
            result = _failed(plan, PrefetchError(f"{plan.label}: internal error: {exc!r}"))
            got.append(result)
            on_event(Event(EventKind.FAILED, plan.label, message=result.error, exit_code=result.exit_code))
        got[:] = [result]
        if options.sources is not None:
            options.sources.finish(plan, result, on_event=on_event)  # seeds the team store
        finish(index, result)

    def not_started(index: int) -> None:
        from prefetch.errors import InterruptedTransferError

        finish(index, _failed(plans[index], InterruptedTransferError(f"{plans[index].label}: not started")))

    workers = files_in_flight(len(plans), limit=options.max_parallel_files,
                              host_connections=options.transfer.host_connections)
    if len(plans) > 1:  # renderers summarize a run of many files (Event.files)
        on_event(Event(EventKind.NOTE, "prefetch", files=len(plans),
                       message=f"{len(plans)} files, up to {workers} at once"))
    try:
        hosts = options.transfer.hosts
        run_in_order(len(plans), run, workers=workers, stop=stop, before_start=before_start, not_started=not_started,
                     limit=near_limit(hosts, workers, flushing=options.transfer.sync_data) if hosts is not None else None)
    finally:
        if own_hosts is not None:
            own_hosts.close()
        forget_transfer(options.transfer)
    return [r for r in results if r is not None]


def _failed(plan: FilePlan, exc: PrefetchError) -> FileResult:
    return FileResult(
        dataset=plan.dataset,
        name=plan.label,
        path=str(plan.final),
        paths=[str(p) for p in plan.paths],
        status="interrupted" if exc.exit_code == ExitCode.INTERRUPTED else "failed",
        error=str(exc),
        exit_code=int(exc.exit_code),
    )

