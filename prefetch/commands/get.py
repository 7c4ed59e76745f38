"""``prefetch get``: download datasets or URLs, resumable and verified."""

from __future__ import annotations

import json
import sys

import click


@click.command()
@click.argument("names", nargs=-1, required=True, metavar="NAME|URL...")
@click.option("-b", "--background", is_flag=True, help="Detach and return at once; follow with status/log/wait.")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Keras root to fill (default $KERAS_HOME or ~/.keras).")
@click.option("--mirror", "mirrors", multiple=True, metavar="NAME|URL", help="Flat dataset mirror (repeatable). Default $PREFETCH_DATASET_MIRROR.")
@click.option("--also-origin", is_flag=True, help="With --mirror: use the origin too, in parallel.")
@click.option("--connections", type=int, metavar="N", help="Connections per file (default: automatic, 8 doubling up to 32 while it pays).")
@click.option("--sha256", metavar="HEX", help="Expected sha256 of a URL download.")
@click.option("--md5", metavar="HEX", help="Expected md5 of a URL download.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Where to save a URL download.")
@click.option("--registry", "registries", multiple=True, type=click.Path(dir_okay=False), help="Extra registry TOML (repeatable).")
@click.option("--retries", type=click.IntRange(min=0), metavar="N", help="Retries in a row without progress before giving up (default 8, $PREFETCH_RETRIES).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="S", help="Give up on a source after S seconds without a byte; a third of it for DNS failures, refused connections and web pages (default 30, $PREFETCH_TIMEOUT).")
@click.option("--fail-fast", is_flag=True, help="Stop every file at the first fatal error.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def get(names, background, cache_dir, mirrors, also_origin, connections, sha256, md5, output, registries, retries,
        timeout, fail_fast, as_json, quiet):
    """Download datasets (cifar10, mnist, ...) or URLs into the Keras cache.

    \b
    Examples (in a notebook cell):
      !prefetch get mnist cifar10
      !prefetch get cifar10 imdb -b
      !prefetch get cifar10 --mirror http://10.0.0.5/datasets/
      !prefetch get https://example.org/file.zip -o data/file.zip --sha256 HEX
    """
    from prefetch.request import GetRequest

    request = GetRequest(
        names=list(names),
        cache_dir=cache_dir,
        mirrors=list(mirrors),
        also_origin=also_origin,
        connections=connections,
        sha256=sha256,
        md5=md5,
        output=output,
        registries=[str(r) for r in registries],
        fail_fast=fail_fast,
        retries=retries,
        timeout=timeout,
    )
    if background:
        from prefetch.jobs import start_job

        job = start_job(request)
        if as_json:
            click.echo(json.dumps({"job": job.id, "log": str(job.log_path), "pid": job.pid}))
        else:
            click.echo(f"started job {job.id} (pid {job.pid}); log: {job.log_path}")
            click.echo(f"follow with: prefetch status {job.id} | prefetch log -f {job.id} | prefetch wait {job.id}")
        return 0
    return run_foreground(request, as_json=as_json, quiet=quiet)


def run_foreground(request, *, as_json: bool, quiet: bool) -> int:
    """Fetch in this process with progress on stderr; a summary on stdout."""
    import signal
    import threading

    from prefetch.fetch import overall_exit_code
    from prefetch.render import make_renderer
    from prefetch.request import plan_request, run_request

    plan_request(request)  # usage errors before any output
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    renderer = make_renderer(sys.stderr, quiet=quiet or as_json, skip_failures=True)
    try:
        results = run_request(request, on_event=renderer, stop=stop)
    finally:
        renderer.close()
        signal.signal(signal.SIGTERM, previous)
    if as_json:
        click.echo(json.dumps([r.__dict__ for r in results], indent=2))
    else:
        for r in results:
            if r.status in ("failed", "interrupted"):
                click.echo(f"prefetch: error: {r.error}", err=True)
            else:
                click.echo(f"{r.status:10} {r.path}")
                for extra in r.paths[1:]:
                    click.echo(f"{'':10} {extra}")
                for d in r.extracted:
                    click.echo(f"{'extracted':10} {d}")
    return overall_exit_code(results)
