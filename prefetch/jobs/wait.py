"""Waiting for jobs and datasets: block until they end, and say how they ended.

Nothing here prints; ``on_poll`` lets a caller show progress while it waits.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from prefetch.errors import ExitCode, JobNotFoundError, WaitTimeoutError
from prefetch.jobs.liveness import list_jobs, reread_jobs
from prefetch.jobs.record_types import JobRecord, JobState, file_in_place, files_in_place
from prefetch.jobs.records import GENERATED_ID_RE, check_timeout


@dataclass
class WaitResult:
    """The outcome of ``wait_for``: the jobs waited for and the overall exit code."""

    jobs: list[JobRecord]
    exit_code: int
    failures: list[str] = field(default_factory=list)  # one line per failed job or dataset
    datasets: list[str] = field(default_factory=list)  # dataset names found complete
    missing: list[str] = field(default_factory=list)  # datasets not in place that no job fetched
    superseded: list[str] = field(default_factory=list)  # stopped jobs whose files are in place anyway


# -- wait ----------------------------------------------------------------------------
def job_exit_code(record: JobRecord) -> int:
    """0 for a done job, else its exit code (1 when unknown)."""
    if record.state == JobState.DONE.value:
        return 0
    return int(record.exit_code) if record.exit_code else int(ExitCode.FAILURE)


def wait_jobs(
    job_ids: Sequence[str],
    *,
    timeout: float | None = None,
    poll: float = 0.25,
    on_poll: Callable[[list[JobRecord]], None] | None = None,
    env: Mapping[str, str] | None = None,
    known: Mapping[str, JobRecord] | None = None,
) -> list[JobRecord]:
    """Block until none of ``job_ids`` is queued or running; their final records.

    A finished job whose record is removed meanwhile (``prefetch clean``) counts as last
    read (``known``: records already read, by id).

    Raises:
        WaitTimeoutError: ``timeout`` seconds passed first.
        JobNotFoundError, UsageError: unknown or invalid id.
    """
    deadline = None if check_timeout(timeout) is None else time.monotonic() + timeout
    last = dict(known or {})
    while True:
        records = reread_jobs(job_ids, last, env)
        if on_poll is not None:
            on_poll(records)
        running = [r for r in records if r.active]
        if not running:
            return records
        if deadline is not None and time.monotonic() >= deadline:
            raise WaitTimeoutError(
                f"timed out after {timeout:g}s waiting for {', '.join(r.id for r in running)} "
                f"({_progress_text(running)}); they keep running: wait again or `prefetch status`"
            )
        left = poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic()))
        time.sleep(left)


def _progress_text(records: Sequence[JobRecord]) -> str:
    done = sum(r.bytes for r in records)
    totals = [r.total for r in records]
    if totals and all(t for t in totals):
        return f"{100.0 * done / sum(totals):.1f}% done"  # type: ignore[arg-type]
    return f"{done} bytes so far"


def wait_for(
    targets: Sequence[str] | None = None,
    *,
    timeout: float | None = None,
    poll: float = 0.25,
    on_poll: Callable[[list[JobRecord]], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> WaitResult:
    """Wait for jobs and/or datasets; the overall result (never raises for a failed job).

    ``targets`` are job ids or dataset names (a dataset waits for every job
    that includes it, then checks its files are in place). None: every job on
    record (``prefetch jobs clean`` forgets finished ones); a stopped job whose
    files have all been put in place since (by another get) counts as done.

    Raises:
        WaitTimeoutError: ``timeout`` passed first. JobNotFoundError: an unknown job id.
        UnknownDatasetError: a name that is neither a job nor a known dataset.
    """
    check_timeout(timeout)
    env = dict(os.environ if env is None else env)
    all_jobs = list_jobs(env)
    by_id = {r.id: r for r in all_jobs}
    job_ids: list[str] = []
    datasets: list[str] = []
    if targets is None:
        job_ids = [r.id for r in all_jobs]
    else:
        for target in targets:
            if target in by_id:
                if target not in job_ids:  # (`wait J J`: one job, reported once)
                    job_ids.append(target)
            elif GENERATED_ID_RE.match(target):
                raise JobNotFoundError(f"no job {target!r}; `prefetch status` lists jobs")
            else:
                datasets.append(target)
    # A dataset waits for every job that includes it.
    for name in datasets:
        for r in all_jobs:
            if _job_mentions(r, name) and r.id not in job_ids:
                job_ids.append(r.id)
    records = wait_jobs(job_ids, timeout=timeout, poll=poll, on_poll=on_poll, env=env, known=by_id) if job_ids else []
    failures: list[str] = []
    exit_code = 0
    explicit = [r for r in records if targets is None or r.id in targets]
    superseded: list[str] = []
    for r in explicit:
        code = job_exit_code(r)
        if code and targets is None and files_in_place(r):
            # Stopped, but a later get or job has put every file in place since.
            superseded.append(r.id)
            continue
        if code:
            failures.append(_failure_line(r))
            exit_code = exit_code or code
    complete: list[str] = []
    missing_names: list[str] = []
    for name in datasets:
        covering = [r for r in records if _job_mentions(r, name)]
        missing = dataset_missing(name, covering, env=env)
        latest = covering[-1] if covering else None
        # A hub repo's ref made before its latest job, which stopped: an earlier commit or selection.
        earlier = latest is not None and job_exit_code(latest) and not all(
            file_in_place(latest, f) for f in latest.files if f.name[:5].lower() == "hf://" and f.name == name)
        if not missing and not earlier:
            complete.append(name)
            continue
        if latest is not None and job_exit_code(latest):
            failures.append(_failure_line(latest))
            exit_code = exit_code or job_exit_code(latest)
        else:
            missing_names.append(name)
            failures.append(
                f"{name}: not in place ({missing}) and no job is fetching it; run `prefetch get {name}`"
            )
            exit_code = exit_code or int(ExitCode.FAILURE)
    return WaitResult(
        jobs=records,
        exit_code=exit_code,
        failures=failures,
        datasets=complete,
        missing=missing_names,
        superseded=superseded,
    )



def _job_mentions(record: JobRecord, name: str) -> bool:
    from prefetch.net.urls import is_url
    from prefetch.cache.registry import normalize_name

    names = record.request.get("names", [])
    if name in names or _url_entry(record.request, name) is not None:
        return True
    if is_url(name):
        return False
    key = normalize_name(name)
    return any(key == normalize_name(str(n)) for n in names) or any(key == normalize_name(f.dataset) for f in record.files)


def dataset_missing(name: str, jobs: Sequence[JobRecord] = (), *, env: Mapping[str, str] | None = None) -> str | None:
    """None when every file of dataset ``name`` is in place, else what is missing.

    Uses the request of the latest job that includes ``name`` (its registry files,
    Keras root, and for a URL its ``output_dir``, ``-o`` or ``urls`` entry; the fields of
    ``name``'s own kind: a hub repo's cache root and selection, ``--root``, ``--torch-hub``),
    else the default registry and root.

    Raises:
        UnknownDatasetError: no registry knows ``name``.
    """
    from prefetch.flow.request import GetRequest
    from prefetch.flow.planning import plan_request
    from prefetch.net.urls import is_url

    base = jobs[-1].request if jobs else {}
    fields = {"names": [name], "cache_dir": base.get("cache_dir"), "registries": base.get("registries") or [],
              "output_dir": base.get("output_dir"),  # a URL's file: where the job put it, not the cwd
              "content_disposition": bool(base.get("content_disposition"))}
    # Where the job's planner put this kind of name, pinned in its record when it started (a Hugging
    # Face, ModelScope or NLTK root, torchvision's --root, torch.hub's checkpoints dir, a URL
    # extracted), and a repo's selection, which names an hf:// commit's manifest: planned without
    # them, a name was looked for where the job never put it (its --cache-dir), and a field of
    # another kind's (--root beside a URL) was refused as a usage error.
    fields.update({key: base[key] for key in _placement_keys(name) if base.get(key)})
    entry = _url_entry(base, name)
    if entry is not None:  # a job's urls=[{"url": ...}] entry (its out/dir too)
        fields.update(names=[], urls=[entry])
    elif base.get("output") and base.get("names") == [name] and is_url(name):  # (-o: one URL only)
        fields["output"] = base["output"]
    request = GetRequest.from_dict(fields)  # type-checked: a damaged record is a one-line error
    plans, _ = plan_request(request, env=env)
    served = _served_paths(jobs)
    for plan in plans:
        paths = plan.paths
        if getattr(plan, "served_name", False):  # (--content-disposition: the name its server gave, if a job got one)
            paths = [served.get((os.path.dirname(plan.final), plan.label), plan.final), *plan.also]
        # Regular files and directories only: a FIFO at a final path is not a dataset in place.
        if not all(os.path.isfile(p) for p in paths):
            return str(next(p for p in paths if not os.path.isfile(p)))
        for path in plan.extract_into:
            if not os.path.isdir(path):
                return str(path)
        for path in getattr(plan, "decompress_to", ()):  # FilePlans; a hub repo has none
            if not os.path.isfile(path):
                return str(path)
    return None


def _placement_keys(name: str) -> tuple[str, ...]:
    """The job request's fields that decide where ``name``'s files go (beyond the ones every kind has)."""
    from prefetch.model.specs import HF_SCHEME, MS_SCHEME, NLTK_SCHEME, named_by
    from prefetch.net.urls import is_url

    if named_by(name, HF_SCHEME):
        return ("hub_cache", "include", "exclude")
    if named_by(name, MS_SCHEME):
        return ("ms_cache", "include", "exclude")
    if named_by(name, NLTK_SCHEME):
        return ("nltk_data",)
    if is_url(name):
        return ("torch_hub", "torch_checkpoints", "extract", "extract_to")
    if name[:12].lower() == "torchvision:":
        return ("root", "torch_checkpoints")  # datasets' --root; weights' checkpoints dir
    return ()  # a registry dataset: its Keras root (cache_dir) and registries


def _served_paths(jobs: Sequence[JobRecord]) -> dict[tuple[str, str], str]:
    """(folder, URL's name) -> where a ``--content-disposition`` job put that URL's file under its
    server's name (the job's own record of it; a later job's wins). A folder holds one URL of a
    name: two would be one final path, refused at planning."""
    found: dict[tuple[str, str], str] = {}
    for record in jobs:
        if record.request.get("content_disposition"):
            for f in record.files:
                if f.path:
                    found[(os.path.dirname(f.path), f.name)] = f.path
    return found


def _failure_line(record: JobRecord) -> str:
    detail = record.error or ""
    failed = [f for f in record.files if f.error]
    if failed:  # (the first three: a job of hundreds of files made a line of kilobytes)
        texts = list(dict.fromkeys(f.error for f in failed if f.error))
        detail = "; ".join(texts[:3]) + (f"; and {len(texts) - 3} more (`prefetch status {record.id}`)"
                                         if len(texts) > 3 else "")
    # A file's own hint is for a foreground run; a job continues with `prefetch resume` (said once).
    detail = detail.replace("; run the same command again to resume", "")
    if record.state in (JobState.INTERRUPTED.value, JobState.CANCELLED.value) and "prefetch resume" not in detail:
        detail = f"{detail} (resume with `prefetch resume {record.id}`)".strip()
    return f"job {record.id} {record.state} (exit {job_exit_code(record)}): {detail}".rstrip(": ")




def _url_entry(request: Mapping, name: str) -> dict | None:
    """The job request's ``urls`` entry (``-i``, ``urls=[...]``) for the URL ``name``, if any."""
    for entry in request.get("urls") or ():
        if isinstance(entry, Mapping) and entry.get("url") == name:
            return dict(entry)
    return None
