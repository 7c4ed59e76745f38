"""Plain-URL downloads: ``URL#sha256=HEX`` fragments, ``-i`` input files, and their file plans.

The ``-i`` list format and one line's options are ``url_list.py``'s.

A local origin works wherever a URL does: ``file:///mnt/data/x.tar.gz``, or a path
(``/mnt/data/x.tar.gz``, ``./x``, ``~/x``, ``dir/x`` on the command line; in an input
file a path starts with ``/``, ``./``, ``../`` or ``~/``). It becomes a ``file://`` URL
(absolute) when planned, and is copied by the engine like any origin (``net/local.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from prefetch.cache.plans import plan_files
from prefetch.errors import UsageError
from prefetch.flow.planners.base import PlanContext, Planner
from prefetch.flow.planners.url_list import (
    HASH_ORDER,
    UrlEntry,
    entry_hashes,
    local_to_url,
    split_fragment,
    url_file_name,
)
from prefetch.flow.request import GetRequest, check_password_given
from prefetch.fs.paths import current_dir, expand_path
from prefetch.model.plans import FilePlan
from prefetch.model.specs import DatasetSpec, ExpectedHash, FileSpec, parse_hash
from prefetch.net.urls import check_url, is_local_path, is_url, link_key, redact_url

def plan_url_specs(
    entries: Iterable[UrlEntry],
    *,
    output_dir: str | None,
    extract_to: str | None,
    extract: bool,
    cwd: Path | None = None,
) -> list[DatasetSpec]:
    """An ad-hoc dataset per URL: where each file goes, its hash, where it is extracted.

    ``out`` is relative to the entry's ``dir``, else ``output_dir`` (``-P``), else
    the current directory. With ``extract``, archives go into ``extract_to`` (default:
    the directory the file is saved in, as ``tar xf`` there would).

    Raises:
        UsageError: a malformed URL or hash, no file name, or two URLs saved to one path.
    """
    here = current_dir if cwd is None else (lambda: cwd)  # (only where a path is relative: it may be removed)
    specs: list[DatasetSpec] = []
    taken: dict[str, tuple[str, int]] = {}  # target -> (its URL, its spec's index)
    bases: dict[str | None, str] = {}  # entry.dir -> its absolute folder (a list's entries share one or few)
    for entry in entries:
        url, hashes = entry_hashes(entry, where=entry.url)
        url = local_to_url(url)
        check_url(url)
        check_password_given(url, url, "run the same `prefetch get URL ...` again (it resumes from the bytes on disk)")
        _check_local_origin(url)
        out = expand_path(entry.out, "out") if entry.out else None
        base = bases.get(entry.dir)
        if base is None and not (out is not None and out.is_absolute()):  # (an absolute out= needs no current dir)
            folder = expand_path(entry.dir or output_dir or here(), "dir" if entry.dir else "-P")
            base = bases[entry.dir] = str(folder if folder.is_absolute() else here() / folder)
        name = url_file_name(url)
        if out is not None:
            target = os.path.join(base or "", out)  # (an absolute out= replaces base)
        elif name:
            target = os.path.join(base, name)
        else:
            raise UsageError(f"cannot tell a file name from {redact_url(url)!r}; give -o PATH "
                             f"(or out=NAME in an input file)")  # (redacted: a password with a quote in it)
        target = os.path.abspath(target)
        prior = taken.get(target)
        if prior is not None:
            if prior[0] != url and link_key(prior[0]) != link_key(url):
                raise UsageError(f"{redact_url(prior[0])} and {redact_url(url)} would both be saved as {target}; "
                                 f"give one of them out=NAME")
            # The same file asked twice (or one object under two signings): fetched once, with the
            # hashes either line gives (a hash on the second line was dropped with it: the file
            # landed unverified); two of one algorithm: refused.
            _same_file_again(specs, prior[1], url, hashes)
            continue
        taken[target] = (url, len(specs))
        into: tuple[str, ...] = ()
        if extract:
            where = expand_path(extract_to, "--extract-to") if extract_to else Path(target).parent
            into = (os.path.abspath(where if where.is_absolute() else here() / where),)
        specs.append(
            DatasetSpec(
                name=name or os.path.basename(target),
                description=url,
                files=(FileSpec(name=name or os.path.basename(target), url=url, target=target,
                                expected=hashes[0] if hashes else None, more_hashes=hashes[1:], extract=into),),
                source="url",
            )
        )
    _check_no_folder_taken(taken, set(bases.values()))
    return specs


def _check_no_folder_taken(taken: dict[str, tuple[str, int]], bases: set[str]) -> None:
    """Refuse a list where one URL's file would be the folder of another's (``out=x`` and
    ``out=x/y``): whichever landed first made the other fail (exit 5) after its download.

    Raises:
        UsageError: naming both URLs.
    """
    for target, (url, _) in taken.items():
        folder = os.path.dirname(target)
        while folder not in bases and folder != os.path.dirname(folder):  # (most files: one look, at their base)
            other = taken.get(folder)
            if other is not None:
                raise UsageError(f"{redact_url(other[0])} would be saved as {folder}, the folder "
                                 f"{redact_url(url)} is saved in ({target}); give one of them out=NAME")
            folder = os.path.dirname(folder)


def _same_file_again(specs: list[DatasetSpec], index: int, url: str, hashes: tuple[ExpectedHash, ...]) -> None:
    """``url`` listed again for the file of ``specs[index]``: its hashes, if new, go to that file
    (one per algorithm: a sha256 on one line and an md5 on the other are both checked); another
    signing of its link (``net/urls.link_key``: a new signature or token) is another source of
    the same object (the first signing expired: the second still fetches it).

    Raises:
        UsageError: the two entries give different hashes of one algorithm.
    """
    from dataclasses import replace

    spec = specs[index]
    file = spec.files[0]
    if url not in file.urls:
        file = replace(file, alternates=(*file.alternates, url))
    known = {h.algorithm: h for h in (file.expected, *file.more_hashes) if h is not None}
    for expected in hashes:
        kept = known.setdefault(expected.algorithm, expected)
        if kept != expected:
            raise UsageError(f"{redact_url(url)} is listed twice with different {kept.algorithm} hashes "
                             f"({kept.hexdigest} and {expected.hexdigest}); keep the right one")
    merged = tuple(known[key] for key in HASH_ORDER if key in known)
    if merged != tuple(h for h in (file.expected, *file.more_hashes) if h is not None):
        file = replace(file, expected=merged[0], more_hashes=merged[1:])
    if file is not spec.files[0]:
        specs[index] = replace(spec, files=(file,))


def _check_local_origin(url: str) -> None:
    """A local origin that is not there (or not a file) is bad input, named before anything starts."""
    if url[:5].lower() != "file:":
        return
    from prefetch.net.local import file_url_path

    path = file_url_path(url)
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    if not path.is_file():
        raise UsageError(f"{path} is not a regular file; give the path of a file")


def _dir_output(output: str | None) -> bool:
    """``-o`` names a folder (ends in ``/`` or is one): the file inside it takes a name of its own."""
    return bool(output) and (output.endswith(("/", os.sep)) or os.path.isdir(expand_path(output, "-o")))


def output_file(output: str | None, url: str) -> Path | None:
    """The file ``-o`` names: inside it when it is a directory or ends in ``/`` (as with cp)."""
    if not output:
        return None
    path = expand_path(output, "-o").absolute()
    if output.endswith(("/", os.sep)) or os.path.isdir(path):  # never raises (a name too long is checked later)
        name = url_file_name(url)  # as plan_url_specs names it
        if not name:
            raise UsageError(f"cannot tell a file name from {redact_url(url)!r}; give -o with a file name")
        return path / name
    return path


def url_entries(names: Sequence[str], request: GetRequest) -> list[UrlEntry]:
    """The plain URLs in order: ``names`` (the URLs among the request's names), then ``urls`` (-i entries).

    ``--sha256``/``--md5``/``-o`` belong to the single URL (``UrlPlanner.check`` checks that).
    """
    entries = []
    for name in names:
        name = local_to_url(name)
        out = output_file(request.output, split_fragment(name)[0])
        entries.append(UrlEntry(url=name, sha256=request.sha256, md5=request.md5, out=str(out) if out else None))
    for data in request.urls:
        entry = UrlEntry.from_dict(data)
        if request.output:
            entry.out = str(output_file(request.output, split_fragment(entry.url)[0]))
        entry.sha256 = entry.sha256 or request.sha256
        entry.md5 = entry.md5 or request.md5
        entries.append(entry)
    return entries


def pin_url_paths(request: GetRequest) -> GetRequest:
    """URL downloads of a background job land where they would in the foreground.

    The worker runs in the jobs directory: ``-P``, ``--extract-to`` and input-file
    ``dir=`` become absolute, and without ``-P`` the current directory is fixed now.
    """
    import dataclasses

    if not request.urls and not any(PLANNER.claims(n) for n in request.names):
        return request

    def absolute(path: str, what: str) -> str:
        path = expand_path(path, what)
        return str(path if path.is_absolute() else current_dir() / path)

    urls = [dict(e, dir=absolute(e["dir"], "dir")) if isinstance(e, dict) and e.get("dir") else e for e in request.urls]
    return dataclasses.replace(
        request,
        names=[local_to_url(n) if is_local_path(n.partition("#")[0]) else n for n in request.names],
        urls=urls,
        output_dir=absolute(request.output_dir, "-P") if request.output_dir else _current_dir_for(request),
        extract_to=absolute(request.extract_to, "--extract-to") if request.extract_to else None,
    )


def _current_dir_for(request: GetRequest) -> str | None:
    """The current directory, fixed now for a job's URLs that land in it; None when it was removed
    and none does (``-o /abs``, absolute ``out=``/``dir=``: they need no current directory).

    Raises:
        LocalFileError: it was removed and a URL lands in it.
    """
    from prefetch.errors import LocalFileError

    try:
        return str(current_dir())
    except LocalFileError:
        if request.output:  # (-o, made absolute already: where every URL of the request goes)
            return None
        if any(PLANNER.claims(n) for n in request.names) or not all(
                isinstance(e, dict) and (e.get("dir") or (e.get("out") and expand_path(e["out"], "out").is_absolute()))
                for e in request.urls):
            raise
        return None


def describe_url_options(request: GetRequest) -> list[str]:
    """Command-line words for the URL options of ``request``; header values never appear."""
    parts: list[str] = []
    for data in request.urls:
        entry = UrlEntry.from_dict(data)
        url, _ = split_fragment(entry.url)
        from prefetch.flow.request import shown_url

        url = shown_url(url)
        hashes = [f"{key}={value}" for key, value in (("sha256", entry.sha256), ("md5", entry.md5)) if value]
        if hashes:  # (both, when both were given: the command retyped checks what the job checks)
            url += "#" + "&".join(hashes)
        parts.append(url if not entry.out else f"{url} (out={entry.out})")
    if request.output_dir:
        parts += ["-P", request.output_dir]
    if request.content_disposition:
        parts.append("--content-disposition")
    if request.extract:
        parts.append("--extract")
    if request.extract_to:
        parts += ["--extract-to", request.extract_to]
    if request.limit_rate not in (None, ""):
        parts += ["--limit-rate", str(request.limit_rate)]
    for header in request.headers:
        parts += ["--header", f"{header.partition(':')[0].strip()}: ***"]
    return parts


class UrlPlanner(Planner):
    """``http(s)://`` and ``file://`` URLs and local paths from the command line and ``-i`` lists."""

    kind = "url"

    def claims(self, name: str) -> bool:
        return is_url(name) or is_local_path(name)

    def check(self, names: Sequence[str], ctx: PlanContext) -> None:
        request = ctx.request
        single = len(request.names) + len(request.urls) == 1 and bool(names or request.urls)
        if (request.sha256 or request.md5 or request.output) and not single:
            raise UsageError("--sha256, --md5 and -o apply to a single URL: `prefetch get URL -o PATH --sha256 HEX`; "
                             "for several, use URL#sha256=HEX, or -i FILE with sha256= and out= per line")
        if (request.extract or request.extract_to) and not (names or request.urls):
            raise UsageError("--extract applies to URL downloads; datasets are extracted where Keras expects them")
        if request.torch_hub and (request.output or request.extract or request.extract_to
                                  or not (names or request.urls)):
            raise UsageError("--torch-hub takes checkpoint URLs and saves them where torch.hub looks "
                             "($TORCH_HOME/hub/checkpoints/<name>; with -P DIR, torch.hub.set_dir(DIR)'s "
                             "DIR/checkpoints/<name>); it cannot be combined with -o or --extract")
        if request.content_disposition and request.torch_hub:
            raise UsageError("--content-disposition does not apply with --torch-hub (the checkpoint's name is its "
                             "URL's: torch.hub checks it by that name's sha256 prefix)")
        if request.sha256:
            parse_hash(request.sha256, algorithm="sha256")  # a bad --sha256 is named as such
        if request.md5:
            parse_hash(request.md5, algorithm="md5")

    def plan(self, names: Sequence[str], ctx: PlanContext) -> list[FilePlan]:
        request = ctx.request
        if request.torch_hub:  # into torch.hub's checkpoints, checked by the name's sha256 prefix
            from prefetch.flow.planners.torchvision import plan_hub_urls

            hashed = [entry_hashes(e, where=e.url) for e in url_entries(names, request)]
            if any(len(hashes) > 1 for _, hashes in hashed):
                raise UsageError("--torch-hub checks a checkpoint by one hash: give either sha256 or md5, not both")
            return plan_hub_urls([(url, hashes[0] if hashes else None) for url, hashes in hashed], ctx)
        entries = url_entries(names, request)
        specs = plan_url_specs(entries, output_dir=request.output_dir,
                               extract_to=request.extract_to, extract=request.extract)
        plans = [plan for spec in specs for plan in plan_files(spec, root=ctx.root)]
        if request.content_disposition:  # (the URLs given no out=/-o: named by their server when they run)
            import dataclasses

            into_dir = _dir_output(request.output)  # (-o DIR/: a folder, the file's name still to choose)
            unnamed = {local_to_url(split_fragment(e.url)[0]) for e in entries if not e.out or into_dir}
            plans = [dataclasses.replace(p, served_name=True) if p.spec.url in unnamed
                     and p.spec.url[:5].lower() in ("http:", "https") else p for p in plans]
        return plans

    def pin(self, request: GetRequest, env: Mapping[str, str]) -> GetRequest:
        if request.torch_hub:  # the torchvision planner pins torch.hub's checkpoints dir (from -P too)
            if request.output_dir:  # (-P DIR: torch.hub.set_dir(DIR), as typed here)
                import dataclasses

                from prefetch.cache.torchvision import given_hub_dir

                return dataclasses.replace(request, output_dir=str(given_hub_dir(request.output_dir)))
            return request
        return pin_url_paths(request)


PLANNER = UrlPlanner()
