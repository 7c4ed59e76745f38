"""``prefetch get``'s work, without click: the request from its parameters, then a job or a
foreground run, and what it prints (``commands/get.py`` is its click command, and ``cli.py``
calls :func:`run_get` straight from the parameters ``commands/get_args.py`` read)."""

from __future__ import annotations

import os
import sys

from prefetch.commands.get_args import echo


def run_get(names, input_file, output_dir, extract, extract_to, limit_rate, headers, background, cache_dir, mirrors,
            seed, also_origin, connections, host_connections, sha256, md5, output, registries, include, exclude,
            lfs_from, root, torch_hub, retries, timeout, fail_fast, nice, print_paths, null, as_json, quiet,
            force=False, content_disposition=False):
    """``prefetch get`` with the parameters click (or ``get_args.parse_get``) read; the exit code."""
    from prefetch.flow.request import GetRequest

    print_paths = print_paths or null
    if print_paths and (background or as_json):
        import click

        raise click.UsageError("--print-paths prints paths as files land in this process: not with "
                               f"{'-b' if background else '--json'} (from Python, prefetch.as_completed(job=...) "
                               "follows a background job)")

    for option, value in (("--sha256", sha256), ("--md5", md5)):
        if value is not None and not value.strip():
            import click

            raise click.UsageError(f"{option} is empty (an unset shell variable?): give the file's hash, or leave "
                                   f"{option} out to download unverified")
    urls = read_input_file(input_file) if input_file else []
    if not names and not input_file:
        import click

        raise click.UsageError("give dataset names or URLs, or -i FILE")
    request = GetRequest(
        names=list(names),
        urls=urls,
        output_dir=output_dir,
        extract=extract,
        extract_to=extract_to,
        limit_rate=limit_rate,
        headers=list(headers),
        cache_dir=cache_dir,
        mirrors=list(mirrors),
        also_origin=also_origin,
        connections=connections,
        host_connections=host_connections,
        sha256=sha256,
        md5=md5,
        output=output,
        registries=[str(r) for r in registries],
        fail_fast=fail_fast,
        seed=seed,
        include=list(include),
        exclude=list(exclude),
        lfs_from=lfs_from,
        root=root,
        torch_hub=torch_hub,
        retries=retries,
        timeout=timeout,
        force=force,
        content_disposition=content_disposition,
        # For hf:// names --cache-dir is the hub cache, as huggingface_hub's cache_dir= (a job
        # pins cache_dir to the Keras root, so the hub's gets its own field).
        hub_cache=cache_dir if cache_dir and any(n[:5].lower() == "hf://" for n in names) else None,
        # ... and for ms:// names the ModelScope cache root, as modelscope's cache_dir= (the same
        # layout as MODELSCOPE_CACHE's: <DIR>/models/OWNER--NAME/snapshots/<revision>/).
        ms_cache=cache_dir if cache_dir and any(n[:5].lower() == "ms://" for n in names) else None,
        nice=nice,
    )
    if background:
        from prefetch.jobs import start_job
        from prefetch.flow.request import job_environment

        job = start_job(request, env=job_environment(request))
        if as_json:
            import json

            echo(json.dumps({"job": job.id, "log": str(job.log_path), "pid": job.pid}))
        else:
            echo(f"started job {job.id} (pid {job.pid}); log: {job.log_path}")
            from prefetch.commands.invoked import follow_line

            echo(follow_line(job.id))
        return 0
    paths = PathPrinter(sys.stdout, end="\0" if null else "\n") if print_paths else None
    return run_foreground(request, as_json=as_json, quiet=quiet, paths=paths)


class PathPrinter:
    """``--print-paths``: each placed file's path on stdout the moment its result is final.

    Called from the download threads (``on_file_done``). When the reader goes away
    (``| head -1``), the downloads are stopped, resumable.
    """

    def __init__(self, stream, *, end: str) -> None:
        import threading

        self.stream, self.end = stream, end
        self.lock = threading.Lock()
        self.stop = None
        self.broken = False
        self.seen: set[int] = set()

    def __call__(self, index: int, result) -> None:
        self.seen.add(id(result))
        if result.status not in ("downloaded", "cached") or result.exit_code:
            return
        with self.lock:
            if self.broken or self.stream is None:  # (stdout closed, ``>&-``: dropped, as click.echo drops it)
                return
            try:
                self.stream.write(result.path + self.end)
                self.stream.flush()
            except (BrokenPipeError, ValueError):
                self.broken = True
                if self.stop is not None:
                    self.stop.set()


def run_foreground(request, *, as_json: bool, quiet: bool, paths: PathPrinter | None = None) -> int:
    """Fetch in this process with progress on stderr; a summary on stdout (or, with ``paths``,
    each placed path as it lands, and the summary's errors only).

    Ctrl-C (or a notebook's interrupt) stops within about a second with the
    state saved (exit 7); a second Ctrl-C exits at once.
    """
    import threading

    from prefetch.model.plans import overall_exit_code
    from prefetch.ui.interrupt import stop_on_interrupt
    from prefetch.ui.render import make_renderer
    from prefetch.flow.planning import plan_once, run_request

    planned = plan_once(request)  # usage errors before any output (planned once)
    stop = threading.Event()
    renderer = make_renderer(sys.stderr, quiet=quiet or as_json, skip_failures=True)
    if paths is not None:
        paths.stop = stop
    try:
        with stop_on_interrupt(stop, on_first=_say_stopping, on_second=_exit_now, hangup=True, terminate=True,
                               restore=False):
            results = run_request(request, on_event=renderer, stop=stop, on_file_done=paths, planned=planned)
    finally:
        renderer.close()
    if paths is not None:
        if paths.broken:
            _quiet_stdout()
        for error in _error_lines(results):
            echo(f"prefetch: error: {error}", err=True)
        for result in results:  # a kind's own plans (hf:// repos) report at the end
            if id(result) not in paths.seen:
                paths(-1, result)
        return overall_exit_code(results)
    if as_json:
        import json

        echo(json.dumps([r.__dict__ for r in results], indent=2))
    else:
        lines = []
        for r in results:
            if r.status not in ("failed", "interrupted"):
                lines.append(f"{r.status:10} {r.path}")
                lines.extend(f"{'':10} {extra}" for extra in r.paths[1:])
                lines.extend(f"{'extracted':10} {_one_line(d)}" for d in r.extracted)
        if lines:  # one write, not an echo per file (thousands of files)
            echo("\n".join(lines))
        for error in _error_lines(results):
            echo(f"prefetch: error: {error}", err=True)
    return overall_exit_code(results)


def _one_line(path: str) -> str:
    """An archive member's path on one line: its control characters (a newline in a member's
    name would start a line of the archive's choosing) written as escapes (``net.failures.shown_text``)."""
    if path.isprintable():
        return path
    from prefetch.net.failures import shown_text

    return shown_text(path)


STOPPED_SHOWN = 3  # files a stop caught (Ctrl-C, --fail-fast) named one by one; the rest are counted


def _error_lines(results) -> list[str]:
    """The failures' errors (:func:`_distinct`), then the first few files a stop caught and one
    line counting the rest: a Ctrl-C or ``--fail-fast`` in a list of 2,000 files is not 2,000
    lines (each such file resumes with the same command)."""
    failed = _same_way([r for r in results if r.status == "failed"])
    stopped = _distinct(r.error for r in results if r.status == "interrupted")
    if len(stopped) > STOPPED_SHOWN + 1:
        rest = len(stopped) - STOPPED_SHOWN
        stopped = stopped[:STOPPED_SHOWN] + [f"... and {rest} more files stopped or not started; "
                                             f"run the same command again to resume them"]
    if not failed and not stopped:
        return []
    from prefetch.commands.error_line import error_line  # (one line each, as cli._fail's)

    return [error_line(e) for e in failed + stopped]


SAME_SHOWN = 3  # files that failed the same way named one by one; the rest are counted


def _same_way(failed) -> list[str]:
    """The failures' errors (:func:`_distinct`), those that differ only by their file's path or
    name grouped: a group's first few are shown and one line names the rest. A full disk, a
    file size limit or a host that answers 404 in a list of 2,000 files is four lines, not 2,000."""
    owner: dict = {}
    for r in failed:
        if r.error:
            owner.setdefault(r.error, r)
    groups: dict = {}
    for error in _distinct(r.error for r in failed):
        r = owner.get(error)
        key = error
        if r is not None:
            for own in (r.path, r.name):
                if own:  # (a path, with its folders, is blanked wherever it is: it names nothing else)
                    key = key.replace(own, "\0") if os.sep in own else _blanked(key, own)
        groups.setdefault(key, []).append((error, r))
    lines = []
    for members in groups.values():
        if len(members) <= SAME_SHOWN + 1:
            lines += [error for error, _r in members]
            continue
        lines += [error for error, _r in members[:SAME_SHOWN]]
        rest = [r.name for _error, r in members[SAME_SHOWN:] if r is not None]
        named = ", ".join(rest[:SAME_SHOWN]) + (", ..." if len(rest) > SAME_SHOWN else "")
        lines.append(f"... and {len(rest)} more files failed the same way ({named}); the same command "
                     f"resumes them once that is fixed")
    return lines


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _blanked(text: str, own: str) -> str:
    """``text`` with ``own`` (a file's name) blanked where it stands as that: at the start,
    or after a ``/`` or a quote, and not followed by more of a name. Elsewhere its text is the
    error's own: file ``0``'s ``127.0.0.1`` and ``403``, file ``404``'s ``HTTP 404``."""
    out, at = [], 0
    while True:
        found = text.find(own, at)
        if found < 0:
            break
        end = found + len(own)
        if (found == 0 or text[found - 1] in "/'\"") and (end == len(text) or text[end] not in _NAME_CHARS):
            out += [text[at:found], "\0"]
        else:
            out.append(text[at:end])
        at = end
    out.append(text[at:])
    return "".join(out)


QUOTERS = 256  # the longest errors looked in for quotes: each error against every other was quadratic


def _distinct(errors) -> list[str]:
    """Each error once, and none that another quotes (an hf:// repo's summary quotes its first file's;
    :func:`_quotes`).

    A quote is looked for in the ``QUOTERS`` longest errors only (a summary is longer than what
    it quotes): a list whose 2,000 files all failed spent ~0.4 s of CPU here, 10,000 ~10 s."""
    unique = [e for e in dict.fromkeys(errors) if e]
    quoters = unique if len(unique) <= QUOTERS else sorted(unique, key=len, reverse=True)[:QUOTERS]
    return [e for e in unique if not any(len(other) > len(e) and e in other and _quotes(other, e) for other in quoters)]


def _quotes(other: str, error: str) -> bool:
    """``other`` holds ``error`` as a quote: starting where a name cannot go on (the start, a space,
    a quote), not inside another name (``pretrain.csv: refused`` holds ``train.csv: refused``,
    and ``11: ...`` holds ``1: ...``: two files' own errors, both said)."""
    at = other.find(error)
    while at >= 0:
        if at == 0 or other[at - 1] not in _NAME_CHARS:
            return True
        at = other.find(error, at + 1)
    return False


def _quiet_stdout() -> None:
    """The reader of stdout went away: nothing more goes there (not even at exit's flush)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _say_stopping() -> None:
    """The first Ctrl-C: say what happens (os.write: safe inside a signal handler)."""
    import os

    try:
        os.write(2, b"\ninterrupted: saving what is on disk (Ctrl-C again to stop at once)\n")
    except OSError:
        pass


def _exit_now() -> None:
    """The second Ctrl-C: leave at once (what is on disk stays resumable)."""
    import os

    try:
        sys.stderr.write("\nprefetch: error: interrupted again: stopped at once; "
                         "run the same command again to resume\n")
        sys.stderr.flush()
    finally:
        os._exit(7)


def read_input_file(path: str) -> list[dict]:
    """The URL entries of an input file (``-`` = stdin), read now: a background job gets them in its record."""
    from prefetch.errors import UsageError
    from prefetch.flow.planners.url_list import parse_input_file

    source = "<stdin>" if path == "-" else path
    try:
        data = _read_list(path)
        text = data.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the input file {source}: {getattr(exc, 'strerror', None) or exc}") from None
    entries = parse_input_file(text, source=source)
    if not entries:
        raise UsageError(f"{source}: no URLs in the input file")
    return [e.to_dict() for e in entries]


INPUT_LIMIT = 64 << 20  # an input file's bytes: ~500,000 URLs; more is no list (-i /dev/zero, a runaway pipe)


def _read_list(path: str) -> bytes:
    """The bytes of ``-i PATH`` (``-`` = stdin): a file, or a pipe or FIFO read to its end, as ``cat``
    would (``-i <(...)`` waits for its writer; Ctrl-C stops it, exit 7); never a device, never
    more than ``INPUT_LIMIT`` bytes.

    Raises:
        OSError: unreadable, a directory or device, no stdin, or past the limit.
    """
    import os
    import stat

    if path == "-":
        stream = getattr(sys.stdin, "buffer", None)
        if stream is None:
            raise OSError(0, "there is no standard input (it is closed)")
        data = stream.read(INPUT_LIMIT + 1)
    else:
        with open(path, "rb") as f:  # (a FIFO: blocks until a writer opens it, as cat does)
            mode = os.fstat(f.fileno()).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
                raise OSError(0, "it is a directory" if stat.S_ISDIR(mode) else "it is a device, not a file")
            data = f.read(INPUT_LIMIT + 1)
    if len(data) > INPUT_LIMIT:
        raise OSError(0, f"it holds more than {INPUT_LIMIT >> 20} MiB, which is no URL list")
    return data
