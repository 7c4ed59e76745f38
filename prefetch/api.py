"""The Python API: ``ensure()``, ``wait()``, ``status()``, ``watch()`` (re-exported by ``prefetch``).

They return data (dataclasses) and raise ``PrefetchError`` subclasses; nothing
is printed. Typical use in a notebook or a training script::

    import prefetch
    job = prefetch.ensure(["cifar10", "imdb"], background=True)   # returns at once
    ...
    prefetch.watch()                  # a live table of the jobs, in place, until they end
    prefetch.wait("cifar10")          # blocks until cifar10 is verified and in place
    (x, y), _ = keras.datasets.cifar10.load_data()

Progress (tqdm.auto: a widget where ipywidgets is installed, text otherwise)
is shown in a notebook or on a terminal, never in a log file; ``progress=False``
turns it off. A kernel interrupt (or Ctrl-C) stops a foreground ``ensure``
within about a second with ``InterruptedTransferError``; the next call resumes. In a notebook
kernel so does one on another thread (``prefetch.ui.interrupt.arm_kernel_cells``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from prefetch.errors import UsageError, error_for_exit_code

# What make_request wants of each option it type-checks (the GetRequest field's type).
_WANTED = {
    **dict.fromkeys(("cache_dir", "output", "output_dir", "extract_to", "root", "sha256", "md5", "seed",
                     "hub_cache", "lfs_from", "ms_cache", "nltk_data", "torch_checkpoints"),
                    "must be a string or a path"),
    **dict.fromkeys(("also_origin", "fail_fast", "extract", "force", "torch_hub", "nice", "content_disposition"),
                    "must be True or False"),
    **dict.fromkeys(("connections", "retries", "host_connections"), "must be a whole number"),
    "timeout": "must be a number of seconds", "limit_rate": 'must be bytes per second or a rate like "2M"',
    "urls": "must be a list of URLs or {'url': ...} entries",
}


def switch(value, what: str, *, none_ok: bool = False) -> None:
    """Check a True/False argument (``progress="no"`` would be true: a bar shown).

    Raises:
        UsageError: anything but True or False (or None, with ``none_ok``).
    """
    if not (isinstance(value, bool) or (none_ok and value is None)):
        raise UsageError(f"{what}= must be True{', False or None' if none_ok else ' or False'}, got {value!r:.60}")


def _names(names: str | Iterable[str], what: str = "names") -> list[str]:
    """One name or several, as strings (paths: ``os.fspath``).

    Raises:
        UsageError: not a string, a path, or an iterable of them (bytes, a number, None).
    """
    if isinstance(names, str) or hasattr(names, "__fspath__"):
        names = [names]
    if isinstance(names, (bytes, bytearray)) or not isinstance(names, Iterable):
        raise UsageError(f"{what} must be a string or a list of strings, got {names!r:.60}")
    return [n if type(n) is str else _name(n, what) for n in names]


def _name(name, what: str) -> str:
    import os

    if isinstance(name, str):
        return str(name)
    if hasattr(name, "__fspath__") and isinstance(os.fspath(name), str):
        return os.fspath(name)
    raise UsageError(f"{what} must be strings, got {name!r:.60} in {what}")


def make_request(names: str | Iterable[str], **options):
    """A ``GetRequest`` from API arguments (``registry``/``mirror`` accept one value or a list)."""
    import os
    from dataclasses import fields

    from prefetch.flow.request import GetRequest, field_value_ok

    if "registry" in options:
        options["registries"] = options.pop("registry")
    if "mirror" in options:
        options["mirrors"] = options.pop("mirror")
    keys = [f.name for f in fields(GetRequest) if f.name not in ("names", "job", "proxies")]  # (proxies: a job's own)
    unknown = sorted(set(options) - set(keys))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {', '.join(unknown)}; expected some of {', '.join(keys)}")
    for key in ("registries", "mirrors", "include", "exclude", "headers"):
        if key in options and not (key == "headers" and isinstance(options[key], Mapping)):
            options[key] = [] if options[key] is None else _names(options[key], key)
    for key in ("cache_dir", "output", "output_dir", "extract_to", "root"):
        if hasattr(options.get(key), "__fspath__"):
            options[key] = os.fspath(options[key])
    if isinstance(options.get("headers"), Mapping):
        options["headers"] = [f"{k}: {v}" for k, v in options["headers"].items()]
    if options.get("urls") is not None:
        urls = options["urls"]
        if isinstance(urls, (str, Mapping)):  # one URL or one entry
            urls = [urls]
        if isinstance(urls, (bytes, bytearray)) or not isinstance(urls, Iterable):
            raise UsageError(f"urls must be a list of URLs or {{'url': ...}} entries, got {urls!r:.60}")
        options["urls"] = [dict(u) if type(u) is dict else _url_entry(u) for u in urls]  # (each checked here)
    for key in options:
        if key != "urls" and not field_value_ok(key, options[key]):
            raise UsageError(f"{key}= {_WANTED.get(key, 'has the wrong type')}, got {options[key]!r:.60}")
    for key in ("connections", "host_connections"):  # (the command line's click range: 1 or more)
        if options.get(key) is not None and options[key] < 1:
            raise UsageError(f"{key}= must be 1 or more, got {options[key]}")
    return GetRequest(names=_names(names), **options)


def _url_entry(entry) -> dict:
    if isinstance(entry, str):
        return {"url": entry}
    if isinstance(entry, Mapping):
        return dict(entry)
    raise UsageError(f"urls= must be a list of URLs or {{'url': ...}} entries, got {entry!r:.60} in it")


def ensure(names: str | Iterable[str] | None = None, background: bool = False, *, on_event=None,
           progress: bool | None = None, **options):
    """Make datasets (or URLs) present, verified and in place in the Keras cache.

    Args:
        names: a dataset name or URL, or several; may be left out when ``urls=`` gives them.
        background: start a detached job and return its ``JobRecord`` at once
            (``.id``, ``.pid``, ``.log_path``); follow it with ``watch``/``wait``/``status``.
        on_event: foreground only (with ``background=True``: UsageError): called with each progress ``Event``.
        progress: foreground only: a tqdm.auto bar; default on in a notebook or on a terminal.
        **options: as the ``get`` flags: ``cache_dir``, ``mirrors`` (or ``mirror``),
            ``also_origin``, ``connections``, ``sha256``, ``md5``, ``output``,
            ``registries`` (or ``registry``), ``fail_fast``; for URLs also ``urls``
            (``-i`` entries: ``{"url", "sha256", "md5", "out", "dir"}``), ``output_dir``,
            ``extract``, ``extract_to``, ``limit_rate`` ("2M"), ``headers``
            ({"Name": "value"} or ["Name: value"]), ``content_disposition`` and ``force``; for ``hf://`` names
            ``include``/``exclude`` (globs) and ``mirror`` (the Hub endpoint).

    Returns:
        Foreground: a list of ``FileResult`` (status ``downloaded`` or ``cached``).
        Background: the ``JobRecord``.

    Raises:
        UsageError (unknown dataset, bad flags), NetworkError, IntegrityError,
        LocalFileError, UnsafeArchiveError, InterruptedTransferError (Ctrl-C or a
        kernel interrupt: the bytes on disk stay, the next call resumes): the
        first failure's class (the others were still attempted); its message
        names the first three failures, its ``.results`` is every file's ``FileResult``.
    """
    if on_event is not None and not callable(on_event):  # (it would fail at the first event, mid-download)
        raise UsageError(f"on_event must be a function called with each Event, got {on_event!r:.60}")
    switch(background, "background")
    switch(progress, "progress", none_ok=True)
    if background and on_event is not None:  # (a job's events are in another process: never called)
        raise UsageError("on_event= is for a foreground ensure; follow a background job with "
                         "prefetch.watch(), prefetch.status() or prefetch.wait()")
    if names is None and not options.get("urls"):
        raise UsageError("ensure needs names (dataset names or URLs) or urls=[...]")
    request = make_request([] if names is None else names, **options)
    if background:
        from prefetch.jobs import start_job
        from prefetch.flow.request import job_environment

        return start_job(request, env=job_environment(request))
    import threading

    from prefetch.model.events import GuardedSink
    from prefetch.ui.interrupt import stop_on_interrupt
    from prefetch.ui.progress import ProgressBar, progress_wanted
    from prefetch.flow.planning import plan_once, run_request

    planned = plan_once(request)  # usage errors before anything starts
    bar = ProgressBar() if (progress if progress is not None else progress_wanted()) else None
    stop = threading.Event()
    guard = None if on_event is None else GuardedSink(on_event, lambda exc: stop.set())
    sink = _both(guard, bar)
    try:
        with stop_on_interrupt(stop):
            results = run_request(request, on_event=sink, stop=stop, planned=planned)
    finally:
        if bar is not None:
            bar.close()
    if guard is not None and guard.error is not None:
        raise guard.error  # the caller's callback failed: its error, the downloads stopped resumable
    failed = [r for r in results if r.status in ("failed", "interrupted") or r.exit_code]
    if failed:
        from prefetch.model.plans import overall_exit_code

        error = error_for_exit_code(overall_exit_code(results), failure_line(failed))
        error.results = results  # where each file went, the placed ones too
        raise error
    return results


def failure_line(failed, shown: int = 3, more: str = "the error's .results: every file") -> str:
    """The first ``shown`` failures' messages and how many more: one line of a few hundred
    characters (an interrupt of 300 files' list said each: 8.6 kB in the notebook's traceback)."""
    texts = list(dict.fromkeys(r.error or r.name for r in failed))
    if len(texts) <= shown:
        return "; ".join(texts)
    return "; ".join(texts[:shown]) + f"; and {len(texts) - shown} more ({more})"


def _both(first, second):
    sinks = [s for s in (first, second) if s is not None]
    if not sinks:
        from prefetch.model.events import ignore_event

        return ignore_event
    if len(sinks) == 1:
        return sinks[0]

    def sink(event) -> None:
        for s in sinks:
            s(event)

    return sink


def wait(names_or_jobs: str | Sequence[str] | None = None, timeout: float | None = None, *,
         progress: bool | None = None):
    """Block until jobs or datasets are done; the ``WaitResult`` (jobs and datasets in place).

    Args:
        names_or_jobs: job ids and/or dataset names (one string or several). A
            dataset waits for every job that includes it; with none running it
            just checks that its files are complete. None: every job on record.
        timeout: seconds; None waits as long as it takes.
        progress: a tqdm.auto bar of the jobs' bytes while waiting; default on in
            a notebook or on a terminal.

    Raises:
        WaitTimeoutError: ``timeout`` passed first (the jobs keep running).
        JobNotFoundError: an unknown job id. UnknownDatasetError: an unknown name.
        NetworkError, IntegrityError, ...: a job failed (the class of its exit code);
        NotDownloadedError: a dataset is not in place and no job is fetching it.
        KeyboardInterrupt: interrupted while waiting (the jobs keep running).
    """
    from prefetch.errors import NotDownloadedError
    from prefetch.jobs import wait_for
    from prefetch.ui.progress import JobsBar, progress_wanted

    switch(progress, "progress", none_ok=True)
    targets = None if names_or_jobs is None else _names(names_or_jobs)
    bar = JobsBar() if (progress if progress is not None else progress_wanted()) else None
    try:
        result = wait_for(targets, timeout=timeout, on_poll=bar)
    except KeyboardInterrupt:
        raise KeyboardInterrupt("stopped waiting; the jobs keep running (prefetch.status(), prefetch.wait())") from None
    finally:
        if bar is not None:
            bar.close()
    if result.exit_code:
        message = "; ".join(result.failures)
        if result.missing and len(result.missing) == len(result.failures):
            raise NotDownloadedError(message)
        raise error_for_exit_code(result.exit_code, message)
    return result


def status(job: str | None = None):
    """Background jobs with their current state: a ``JobList`` of ``JobRecord`` (or one, given ``job``).

    Both show as a table in a notebook (``_repr_html_``) and in ``repr``. A job
    whose worker died shows ``state == "interrupted"``.

    Raises:
        JobNotFoundError, UsageError: unknown or invalid job id.
    """
    from prefetch.jobs import get_job, list_jobs
    from prefetch.jobs.views import JobList

    if job is not None:
        return get_job(job)
    return JobList(list_jobs())


def watch(jobs: str | Sequence[str] | None = None, *, interval: float = 1.0, timeout: float | None = None):
    """Show the jobs' table, updated in place, until none of them runs; their final ``JobList``.

    In a notebook the table is one output updated in place (HTML); elsewhere a
    text table is printed when something changed, at most every few seconds.
    Interrupting it (Ctrl-C, the kernel's stop button) leaves the jobs running.

    Args:
        jobs: job ids (default: the running ones, else the latest).
        interval: seconds between updates.
        timeout: give up watching after this long (the jobs keep running).
    """
    from prefetch.jobs.watch import watch_jobs

    ids = None if jobs is None else _names(jobs)
    return watch_jobs(ids, interval=interval, timeout=timeout)


def cache_usage(*, cache_dir=None, registry=None):
    """Datasets with something on disk: a list of ``DatasetUsage`` (``.bytes``, ``.paths``, ``.partials``)."""
    registry_, root, state = _housekeeping_context(cache_dir, registry)
    from prefetch.operations.housekeeping import cache_usage as usage

    return usage(registry_, root=root, state=state)


def remove(names: str | Iterable[str], *, cache_dir=None, registry=None, dry_run: bool = False, root=None,
           torch_hub: bool = False, output_dir=None, hub_cache=None, ms_cache=None):
    """Remove datasets from the cache (``prefetch rm``); the ``RemoveResult``.

    Files being downloaded are left alone and listed in ``.skipped``. ``torchvision:`` names
    (and URLs with ``torch_hub=True``) remove only what prefetch placed for them, under
    ``root`` (default ./data) or in torch.hub's checkpoints; other files there are listed
    in ``.not_placed``. ``output_dir`` with ``torch_hub``: torch.hub's dir as ``get``'s
    ``output_dir`` set it (``torch.hub.set_dir``; its ``checkpoints/``). ``hub_cache``/``ms_cache``:
    the hf:// / ms:// cache, as ``ensure``'s same arguments filled it (default: the environment's).

    Raises:
        UnknownDatasetError: a name no registry knows (nothing is removed).
    """
    switch(dry_run, "dry_run")
    switch(torch_hub, "torch_hub")
    tv_root = _path_or_none(root, "root")
    hub_dir = _path_or_none(output_dir, "output_dir")
    if hub_dir is not None and not torch_hub:
        raise UsageError("output_dir is torch.hub's dir here: give it with torch_hub=True")
    registry_, keras, state = _housekeeping_context(cache_dir, registry)
    import os

    from prefetch.operations.housekeeping import remove_datasets

    extra = [] if registry is None else _names(registry, "registry")
    from prefetch.hf.names import hub_cache_root
    from prefetch.ms.names import ms_cache_root

    hub_cache, ms_cache = _path_or_none(hub_cache, "hub_cache"), _path_or_none(ms_cache, "ms_cache")
    roots = {"hub_root": hub_cache_root(cache_dir=hub_cache).absolute() if hub_cache else None,
             "ms_root": ms_cache_root({}, ms_cache).absolute() if ms_cache else None}
    return remove_datasets(_names(names), registry_, root=keras, state=state, dry_run=dry_run, env=os.environ,
                           torchvision_root=tv_root, registry_files=extra, torch_hub=torch_hub, hub_dir=hub_dir,
                           **roots)


def clean(*, older_than: str | float = "7d", cache_dir=None, dry_run: bool = False, root=None):
    """Remove stale partial downloads and leftovers (``prefetch clean``); the ``RemoveResult``.

    ``older_than``: an age like ``"7d"``, ``"12h"``, or seconds. ``root``: a torchvision
    datasets' root whose folders are tidied too (default ./data, when it exists); torch.hub's
    checkpoints and ModelScope's cache always are.
    """
    from prefetch.operations.housekeeping import clean_cache, parse_age, torch_ms_places
    from prefetch.cache.layout import keras_root
    from prefetch.fs.paths import state_dir

    switch(dry_run, "dry_run")
    age = parse_age(older_than)
    return clean_cache(root=keras_root(cache_dir=_path_or_none(cache_dir, "cache_dir")), state=state_dir(),
                       older_than=age, dry_run=dry_run, **torch_ms_places(_path_or_none(root, "root")))


def _housekeeping_context(cache_dir, registry):
    from pathlib import Path

    from prefetch.cache.layout import keras_root
    from prefetch.fs.paths import config_dir, state_dir
    from prefetch.cache.registry import load_registry

    extra = [] if registry is None else _names(registry, "registry")
    root = keras_root(cache_dir=_path_or_none(cache_dir, "cache_dir"))
    loaded = load_registry(extra_files=[Path(r) for r in extra], config_dir=config_dir())
    return loaded, root, state_dir()


def _path_or_none(value, what: str) -> str | None:
    """``value`` as a path string (None stays None).

    Raises:
        UsageError: not a string or a path.
    """
    import os

    if value is None:
        return None
    if isinstance(value, str) or (hasattr(value, "__fspath__") and isinstance(os.fspath(value), str)):
        return os.fspath(value)
    raise UsageError(f"{what}= must be a string or a path, got {value!r:.60}")
