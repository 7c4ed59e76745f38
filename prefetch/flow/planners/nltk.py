"""``nltk:ID`` (a package or a collection) into NLTK's data dir, as ``nltk.download`` leaves it.

Each package is a ``FilePlan``: ``<data dir>/<subdir>/<id>.zip`` checked by the index's
size and md5, unzipped into ``<data dir>/<subdir>/`` (so ``<subdir>/<id>/``) when the
index says ``unzip="1"``; the flow does the rest (resume, locks, extraction, placement).

Where the index comes from (``prefetch.cache.nltk_data`` has the layout):

* ``--mirror BASE`` in the gh-pages layout: ``BASE/index.xml`` is read when planning, and
  that index alone says which ids exist, with their sizes and hashes; packages come from
  ``BASE/packages/<subdir>/<id>.zip``. BASE is an http(s) URL, the team store
  (``s3://BUCKET/PREFIX``: its objects are read like any store object, presigned), a
  local folder (``/path`` or ``file:///path``: an export on a NAS mount), or a
  ``[datasets.NAME]`` entry of mirrors.toml naming one of those;
* else the built-in snapshot; an id it lacks is looked up in the origin's index on
  raw.githubusercontent.com (blocked from mainland China: then give ``--mirror``).
  Snapshot entries added after its date carry a URL pinned to the nltk_data commit their
  facts come from, so the bytes fetched are the bytes described.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from prefetch.errors import NetworkError, UsageError
from prefetch.flow.planners.base import PlanContext, Planner
from prefetch.flow.request import GetRequest
from prefetch.model.plans import FilePlan
from prefetch.model.specs import NLTK_SCHEME, ExpectedHash, FileSpec, named_by

if TYPE_CHECKING:
    from prefetch.cache import nltk_data

# cache/nltk_data.py (the snapshot, the index parser) is imported where an nltk: name is planned:
# a command without one does not pay for it at start-up.

INDEX_LIMIT = 16 << 20  # the real index.xml is about 64 kB
UNZIPPED_SLACK = 1 << 20  # nltk's downloader: UNZIPPED_SIZE_SLACK over the index's unzipped_size


class NltkPlanner(Planner):
    """NLTK packages are plain files: the flow runs their plans with every other file."""

    kind = "nltk"
    flat_mirrors = False  # --mirror is a gh-pages layout mirror (BASE/index.xml), read here

    def claims(self, name: str) -> bool:
        return named_by(name, NLTK_SCHEME)  # (cache.nltk_data.is_nltk_name, without importing it)

    def check(self, names: Sequence[str], ctx: PlanContext) -> None:
        if names and len(ctx.request.mirrors) > 1:
            raise UsageError("with nltk: names, --mirror names one NLTK data mirror (BASE with BASE/index.xml)")
        if names and ctx.request.seed:
            raise UsageError("--seed does not apply to nltk: names (a store holds them in nltk_data's layout, "
                             "with its index.xml): `prefetch push nltk:ID s3://BUCKET/PREFIX` publishes them")
        if names and (ctx.request.sha256 or ctx.request.md5 or ctx.request.output):
            raise UsageError("nltk: packages are checked by the index's md5 (or sha256) and go to NLTK's data dir; "
                             "--sha256/--md5/-o do not apply (NLTK_DATA=DIR installs into DIR)")

    def plan(self, names: Sequence[str], ctx: PlanContext) -> list[FilePlan]:
        if not names:
            return []
        from prefetch.cache import nltk_data

        ids = [nltk_data.parse_nltk_name(n) for n in names]
        request = ctx.request
        data_dir = Path(request.nltk_data) if request.nltk_data else nltk_data.nltk_data_dir(ctx.env).absolute()
        if request.mirrors:
            base, index = _mirror_index(request.mirrors[0], ctx)
        else:
            base, index = nltk_data.ORIGIN, nltk_data.load_snapshot()
            if index.missing(ids):
                index = _read_index(base, ctx, missing=index.missing(ids))
        packages = index.expand(ids, successors=True)
        why = nltk_data.not_private(data_dir, [pkg.subdir for pkg in packages])
        if why:
            from prefetch.errors import LocalFileError

            raise LocalFileError(why)
        return [_plan_package(pkg, base=base, data_dir=data_dir) for pkg in packages]


    def pin(self, request: GetRequest, env: Mapping[str, str]) -> GetRequest:
        """NLTK's data dir, fixed now (NLTK_DATA, or the first writable entry of nltk.data.path),
        and a folder mirror's path made absolute (a worker runs elsewhere)."""
        if not any(self.claims(n) for n in request.names):
            return request
        import os

        from prefetch.cache import nltk_data
        from prefetch.net.urls import is_local_path

        mirrors = [os.path.abspath(os.path.expanduser(m)) if is_local_path(m) else m for m in request.mirrors]
        given = request.nltk_data and os.path.abspath(os.path.expanduser(request.nltk_data))  # (the worker runs elsewhere)
        return dataclasses.replace(request, mirrors=type(request.mirrors)(mirrors),
                                   nltk_data=given or str(nltk_data.nltk_data_dir(env).absolute()))


def _plan_package(pkg: nltk_data.NltkPackage, *, base: str, data_dir: Path) -> FilePlan:
    from prefetch.cache import nltk_data

    final = data_dir.joinpath(*pkg.path.split("/"))
    # A snapshot entry pinned to a commit is fetched from there; a mirror's by its place in the layout.
    url = pkg.url if pkg.url and base == nltk_data.ORIGIN else nltk_data.package_url(base, pkg)
    spec = FileSpec(name=f"{pkg.id}.zip", url=url, target=str(final),
                    expected=ExpectedHash(*pkg.expected), size=pkg.size)
    # explicit_url: a flat dataset mirror (PREFETCH_DATASET_MIRROR, with datasets in the same
    # command) does not hold NLTK packages; they come from their own URL only.
    # As nltk's downloader unzips: every member under the package's own <id>/ (another package's
    # folder is never replaced), and no more than the index's unzipped size and 1 MiB of slack.
    return FilePlan(dataset=f"nltk:{pkg.id}", spec=spec, final=final, also=(),
                    extract_into=(final.parent,) if pkg.unzip else (), explicit_url=True, extract_top=pkg.id,
                    extract_max_bytes=pkg.unzipped_size + UNZIPPED_SLACK if pkg.unzipped_size > 0 else None,
                    private=True)


def _mirror_index(value: str, ctx: PlanContext) -> tuple[str, nltk_data.NltkIndex]:
    """(BASE, its index) for ``--mirror``: an http(s) URL, ``s3://``, a local folder, or a mirrors.toml name.

    Raises:
        UsageError: a malformed value. NetworkError: no index there.
    """
    import os

    from prefetch.net.local import file_url_path
    from prefetch.net.urls import check_url, is_local_path, is_url
    from prefetch.store.s3 import is_s3_url, parse_store_url

    value = value.strip()
    if is_s3_url(value):
        from prefetch.store.nltk_mirror import read_store_index

        base = parse_store_url(value).url.rstrip("/")
        return base, read_store_index(base, env=ctx.env)
    if is_local_path(value) or value[:5].lower() == "file:":
        from prefetch.store.nltk_mirror import read_folder_index

        if value[:5].lower() == "file:":
            check_url(value)
            folder = file_url_path(value)
        else:
            folder = Path(os.path.abspath(os.path.expanduser(value)))
        return folder.as_uri().rstrip("/"), read_folder_index(folder)
    if is_url(value):
        check_url(value)
        base = value.rstrip("/")
        return base, _read_index(base, ctx)
    from prefetch.mirrors.catalog import resolve_dataset_mirror

    resolved = resolve_dataset_mirror(value, config_dir=ctx.config)
    if not (is_url(resolved) or is_s3_url(resolved) or is_local_path(resolved)):
        raise UsageError(f"--mirror {value}: mirrors.toml gives {resolved!r}, not an NLTK data mirror")
    return _mirror_index(resolved, ctx)


def _read_index(base: str, ctx: PlanContext, *, missing: Sequence[str] = ()) -> nltk_data.NltkIndex:
    """``BASE/index.xml``, parsed (a few attempts on connection trouble).

    Raises:
        NetworkError: unreachable, an error status, too big, or not an index.
    """
    import time

    from prefetch.cache import nltk_data
    from prefetch.engine.options import TransferOptions
    from prefetch.net.failures import TransientHTTPError
    from prefetch.net.http import Client, open_url

    url = f"{base}/index.xml"
    options = TransferOptions.from_env(ctx.env)
    why = f" (the built-in snapshot lacks {', '.join(missing)})" if missing else ""
    last = ""
    for attempt in range(3):
        if attempt:
            time.sleep(min(options.backoff_cap, options.backoff_base * 2 ** attempt))
        client = Client(timeouts=options.timeouts)
        try:
            resp, final = open_url(client, url)
            try:
                data = resp.read(INDEX_LIMIT + 1)
            finally:
                resp.close()
        except TransientHTTPError as exc:
            last = str(exc)
            continue
        except NetworkError as exc:
            raise NetworkError(f"reading the NLTK index {url}{why}: {exc}; "
                               "give --mirror BASE (a copy of nltk_data's gh-pages)") from None
        except OSError as exc:
            last = str(exc) or type(exc).__name__
            continue
        finally:
            client.close()
        if len(data) > INDEX_LIMIT:
            raise NetworkError(f"{url} is larger than {INDEX_LIMIT >> 20} MB: not an NLTK index")
        return nltk_data.parse_index(data, source=final)
    raise NetworkError(f"could not read the NLTK index {url}{why}: {last}; "
                       "give --mirror BASE (a copy of nltk_data's gh-pages)")


PLANNER = NltkPlanner()
