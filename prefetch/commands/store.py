"""``prefetch push`` and ``prefetch export``: share the local cache with a team."""

from __future__ import annotations

import json
from dataclasses import asdict

import click


@click.command()
@click.argument("targets", nargs=-1, required=True, metavar="NAME|PATH... s3://BUCKET/PREFIX")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Keras root to read (default $KERAS_HOME or ~/.keras).")
@click.option("--registry", "registries", multiple=True, type=click.Path(dir_okay=False), help="Extra registry TOML.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def push(targets, cache_dir, registries, as_json):
    """Upload verified files from the local cache to a team store on S3.

    Multipart and resumable (run it again after an interruption); the sha256 goes into
    the object's metadata and objects already there with the same sha256 are skipped.
    The store may be a [datasets.NAME] in mirrors.toml. Needs boto3:
    pip install 'prefetch-datasets[s3]' (exit 1 without it).

    nltk:ID names (packages or collections) go from NLTK's data dir ($NLTK_DATA) into
    the nltk_data gh-pages layout, PREFIX/packages/<subdir>/<id>.zip, and PREFIX/index.xml
    is merged with their entries: `prefetch get nltk:ID --mirror s3://BUCKET/PREFIX`
    reads them from there.

    \b
    Examples (in a notebook cell):
      !prefetch push cifar10 mnist s3://team-bucket/keras-datasets
      !prefetch push ./my-data.tar.gz s3://team-bucket/keras-datasets
      !prefetch push nltk:punkt_tab nltk:stopwords s3://team-bucket/nltk
    """
    from pathlib import Path

    from prefetch.errors import UsageError
    from prefetch.cache.layout import keras_root
    from prefetch.fs.paths import config_dir, state_dir
    from prefetch.store.push import push_targets
    from prefetch.cache.registry import load_registry
    from prefetch.flow.planning import resolve_mirror

    if len(targets) < 2:
        raise UsageError("give what to push and where: `prefetch push NAME... s3://BUCKET/PREFIX`")
    *names, dest = targets
    store = resolve_mirror(dest, config=config_dir())
    if not store.startswith("s3://"):
        raise UsageError(f"the last argument must be a team store, s3://BUCKET/PREFIX, got {dest!r}")
    import os

    from prefetch.cache import nltk_data

    nltk_ids = [nltk_data.parse_nltk_name(n) for n in names if nltk_data.is_nltk_name(n)]
    names = [n for n in names if not nltk_data.is_nltk_name(n)]

    def show(result) -> None:
        if not as_json:
            click.echo(f"{result.status:9} {result.url}  ({result.size} bytes, sha256 {result.sha256[:12]}...)")

    results = []
    if names:
        registry = load_registry(extra_files=[Path(r) for r in registries], config_dir=config_dir())
        results += push_targets(list(names), store, registry=registry, root=keras_root(cache_dir=cache_dir),
                                state_dir=state_dir(), env=os.environ, on_result=show)
    if nltk_ids:
        from prefetch.store.nltk_mirror import push_nltk

        results += push_nltk(nltk_ids, store, data_dir=nltk_data.nltk_data_dir(os.environ).absolute(),
                             state_dir=state_dir(), env=os.environ, on_result=show)
    if as_json:
        click.echo(json.dumps([asdict(r) for r in results], indent=2))
    return 0


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.argument("names", nargs=-1, metavar="[NAME...]")
@click.option("--cache-dir", type=click.Path(file_okay=False), help="Keras root to read (default $KERAS_HOME or ~/.keras).")
@click.option("--registry", "registries", multiple=True, type=click.Path(dir_okay=False), help="Extra registry TOML.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def export(directory, names, cache_dir, registries, as_json):
    """Write DIR/<file name> for every verified cached file, plus DIR/SHA256SUMS.

    That is the flat dataset-mirror layout: serve DIR with nginx (or any static host)
    and others use it with `prefetch get NAME --mirror http://HOST/PATH/`. Without
    NAMEs, every completely cached dataset is exported.

    nltk:ID names (packages or collections) are written from NLTK's data dir ($NLTK_DATA)
    in the nltk_data gh-pages layout instead: DIR/packages/<subdir>/<id>.zip and
    DIR/index.xml (merged with an index already there). Another machine reads DIR, over
    http or as a folder (a NAS mount), with `prefetch get nltk:ID --mirror DIR`.

    \b
    Examples (in a notebook cell):
      !prefetch export /srv/keras-datasets
      !prefetch export /srv/keras-datasets cifar10 mnist
      !prefetch export /mnt/nas/nltk nltk:punkt_tab nltk:stopwords
    """
    from pathlib import Path

    from prefetch.cache import nltk_data
    from prefetch.store.export import export_cache
    from prefetch.cache.layout import keras_root
    from prefetch.fs.paths import config_dir
    from prefetch.cache.registry import load_registry

    nltk_ids = [nltk_data.parse_nltk_name(n) for n in names if nltk_data.is_nltk_name(n)]
    if nltk_ids:
        import os

        from prefetch.fs.paths import state_dir
        from prefetch.store.nltk_mirror import export_nltk

        if len(nltk_ids) != len(names):
            from prefetch.errors import UsageError

            raise UsageError("nltk: names are exported in their own layout: export them to a directory of their own")
        published = export_nltk(Path(directory), nltk_ids, data_dir=nltk_data.nltk_data_dir(os.environ).absolute(),
                                state_dir=state_dir())
        if as_json:
            click.echo(json.dumps({"directory": str(Path(directory).absolute()), "files": published.files,
                                   "collections": published.collections}, indent=2))
            return 0
        for f in published.files:
            click.echo(f"{f['how']:7} {f['path']}  ({f['size']} bytes)")
        click.echo(f"wrote {Path(directory).absolute() / 'index.xml'} ({len(published.files)} packages)")
        return 0
    registry = load_registry(extra_files=[Path(r) for r in registries], config_dir=config_dir())
    report = export_cache(Path(directory), registry=registry, root=keras_root(cache_dir=cache_dir),
                          names=list(names) or None)
    if as_json:
        click.echo(json.dumps(asdict(report), indent=2))
        return 0
    for f in report.files:
        click.echo(f"{f['how']:7} {Path(report.directory) / f['name']}  ({f['size']} bytes)")
    click.echo(f"wrote {Path(report.directory) / 'SHA256SUMS'} ({len(report.files)} files)")
    if report.skipped:
        click.echo(f"not cached (skipped): {', '.join(report.skipped)}")
    return 0
