"""``prefetch get``: download datasets or URLs, resumable and verified."""

from __future__ import annotations

import json
import sys

import click


@click.command()
@click.argument("names", nargs=-1, metavar="NAME|URL...")
@click.option("-b", "--background", is_flag=True, help="Detach and return at once; follow with status/log/wait.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Keras root to fill (default $KERAS_HOME or ~/.keras).")
@click.option("--mirror", "mirrors", multiple=True, metavar="NAME|URL", help="Flat dataset mirror or s3://BUCKET/PREFIX team store (repeatable). Default $PREFETCH_DATASET_MIRROR. For hf:// names: the Hub endpoint (hf-mirror, or a URL); for ms:// the ModelScope endpoint; for nltk: an NLTK data mirror with BASE/index.xml (http(s), s3://BUCKET/PREFIX, or a folder).")
@click.option("--seed", metavar="s3://BUCKET/PREFIX|NAME", help="Team store: read what it has, fetch the rest elsewhere, upload what it lacked.")
@click.option("--also-origin", is_flag=True, help="With --mirror: use the origin too, in parallel.")
@click.option("--connections", type=int, metavar="N", help="Connections per file (default: automatic, 8 doubling up to 32 while it pays).")
@click.option("--host-connections", "host_connections", type=click.IntRange(min=1), metavar="N", help="Connections to one host from all files together (default 32, $PREFETCH_HOST_CONNECTIONS); a 429/503 lowers it.")
@click.option("--sha256", metavar="HEX", help="Expected sha256 of a URL download.")
@click.option("--md5", metavar="HEX", help="Expected md5 of a URL download.")
@click.option("-o", "--output", type=click.Path(), help="Where to save a URL download (a directory, or ending in /: inside it).")
@click.option("-i", "--input-file", "input_file", metavar="FILE",
              help="Read URLs from FILE ('-' = stdin): one per line, with optional sha256=HEX md5=HEX out=NAME.")
@click.option("-P", "--output-dir", "output_dir", type=click.Path(file_okay=False), help="Save URL downloads into DIR (default: here).")
@click.option("--extract", is_flag=True, help="Extract URL downloads that are archives (tar, tar.gz/bz2/xz, zip), safely.")
@click.option("--extract-to", "extract_to", type=click.Path(file_okay=False), help="With --extract: into DIR (default: beside the file).")
@click.option("--limit-rate", "limit_rate", metavar="RATE", help="Total bandwidth of all connections, e.g. 2M or 500k (bytes/s, 1024-based).")
@click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'", help="Extra request header (repeatable); never logged or stored.")
@click.option("--registry", "registries", multiple=True, type=click.Path(dir_okay=False), help="Extra registry TOML (repeatable).")
@click.option("--include", multiple=True, metavar="GLOB", help="hf:// and ms:// repos: only files matching (repeatable), e.g. '*.safetensors'.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="hf:// and ms:// repos: leave out files matching (repeatable).")
@click.option("--lfs-from", "lfs_from", metavar="ms://OWNER/NAME", help="hf:// repo: take LFS files that this ModelScope repo also holds (same sha256) from there too, checked by the Hub's sha256.")
@click.option("--root", type=click.Path(file_okay=False), help="torchvision:<Class> datasets: the root you pass to torchvision (default ./data).")
@click.option("--torch-hub", "torch_hub", is_flag=True, help="URLs: save into torch.hub's checkpoints ($TORCH_HOME/hub/checkpoints), checked by the name's sha256 prefix.")
@click.option("--retries", type=click.IntRange(min=0), metavar="N", help="Retries in a row without progress before giving up (default 8, $PREFETCH_RETRIES).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S", help="Give up on a source after S seconds without a byte; a third of it for DNS failures, refused connections and web pages (default 30, $PREFETCH_TIMEOUT).")
@click.option("--fail-fast", is_flag=True, help="Stop every file at the first fatal error.")
@click.option("--force", is_flag=True, help="Download again even when a verified file (or hf:// repo) is in place.")
@click.option("--print-paths", "print_paths", is_flag=True,
              help="Print each placed path on its own line as its file lands (for | xargs); progress goes to stderr.")
@click.option("-0", "--null", "null", is_flag=True, help="With --print-paths (implied): end each path with NUL, not newline (xargs -0).")
@click.option("--nice/--no-nice", "nice", default=None, help="With -b: run the job at low CPU and I/O priority (default; $PREFETCH_NICE=0 turns it off).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def get(names, input_file, output_dir, extract, extract_to, limit_rate, headers, background, cache_dir, mirrors, seed,
        also_origin, connections, host_connections, sha256, md5, output, registries, include, exclude, lfs_from, root,
        torch_hub, retries, timeout, fail_fast, nice, print_paths, null, as_json, quiet, force=False):
    """Download datasets (cifar10, mnist, ...) or URLs into the Keras cache, and
    Hugging Face repos (hf://ORG/NAME, hf://datasets/ORG/NAME) into the Hugging Face cache;
    torchvision datasets (torchvision:CIFAR10) under --root and weights (torchvision:resnet50)
    into torch.hub's cache; ModelScope repos (ms://ORG/NAME, ms://datasets/ORG/NAME) into
    ModelScope's cache; NLTK packages and collections (nltk:punkt_tab, nltk:popular) into
    NLTK's data dir.

    \b
    Examples (in a notebook cell):
      !prefetch get mnist cifar10
      !prefetch get cifar10 imdb -b
      !prefetch get cifar10 --mirror http://10.0.0.5/datasets/
      !prefetch get cifar10 --seed s3://team-bucket/keras-datasets
      !prefetch get https://example.org/file.zip -o data/file.zip --sha256 HEX
      !prefetch get https://example.org/file.zip -o data/     # data/file.zip
      !prefetch get -i urls.txt -P data/ --limit-rate 2M
      !prefetch get https://example.org/a.tar.gz#sha256=HEX --extract -P data/
      !prefetch get hf://Qwen/Qwen2.5-0.5B -b --mirror hf-mirror
      !prefetch get hf://Qwen/Qwen2.5-0.5B --lfs-from ms://Qwen/Qwen2.5-0.5B -b
      !prefetch get torchvision:CIFAR10 --root ./data -b   # then CIFAR10("./data", download=True)
      !prefetch get torchvision:resnet50                  # then resnet50(weights="DEFAULT")
      prefetch get -i shards.txt -P shards/ --print-paths | xargs -n1 python train_on.py
    """
    from prefetch.flow.request import GetRequest

    print_paths = print_paths or null
    if print_paths and (background or as_json):
        raise click.UsageError("--print-paths prints paths as files land in this process: not with "
                               f"{'-b' if background else '--json'} (from Python, prefetch.as_completed(job=...) "
                               "follows a background job)")

    urls = read_input_file(input_file) if input_file else []
    if not names and not input_file:
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
        # For hf:// names --cache-dir is the hub cache, as huggingface_hub's cache_dir= (a job
        # pins cache_dir to the Keras root, so the hub's gets its own field).
        hub_cache=cache_dir if cache_dir and any(n[:5].lower() == "hf://" for n in names) else None,
        nice=nice,
    )
    if background:
        from prefetch.jobs import start_job
        from prefetch.flow.request import job_environment

        job = start_job(request, env=job_environment(request))
        if as_json:
            click.echo(json.dumps({"job": job.id, "log": str(job.log_path), "pid": job.pid}))
        else:
            click.echo(f"started job {job.id} (pid {job.pid}); log: {job.log_path}")
            click.echo(f"follow with: prefetch status {job.id} | prefetch log -f {job.id} | prefetch wait {job.id}")
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
            if self.broken:
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
        for error in _distinct(r.error for r in results if r.status in ("failed", "interrupted")):
            click.echo(f"prefetch: error: {error}", err=True)
        for result in results:  # a kind's own plans (hf:// repos) report at the end
            if id(result) not in paths.seen:
                paths(-1, result)
        return overall_exit_code(results)
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in results], indent=2))
    else:
        errors, lines = [], []
        for r in results:
            if r.status in ("failed", "interrupted"):
                errors.append(r.error)
            else:
                lines.append(f"{r.status:10} {r.path}")
                lines.extend(f"{'':10} {extra}" for extra in r.paths[1:])
                lines.extend(f"{'extracted':10} {d}" for d in r.extracted)
        if lines:  # one write, not an echo per file (thousands of files)
            click.echo("\n".join(lines))
        for error in _distinct(errors):
            click.echo(f"prefetch: error: {error}", err=True)
    return overall_exit_code(results)


def _distinct(errors) -> list[str]:
    """Each error once, and none that another quotes (an hf:// repo's summary quotes its first file's)."""
    unique = [e for e in dict.fromkeys(errors) if e]
    return [e for e in unique if not any(e != other and e in other for other in unique)]


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
    from prefetch.flow.planners.urls import parse_input_file

    if path == "-":
        text, source = sys.stdin.read(), "<stdin>"
    else:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the input file {path}: {getattr(exc, 'strerror', None) or exc}") from None
        source = path
    entries = parse_input_file(text, source=source)
    if not entries:
        raise UsageError(f"{source}: no URLs in the input file")
    return [e.to_dict() for e in entries]
