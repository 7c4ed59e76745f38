"""The ``prefetch get`` command line a job shows (its record's ``command``: ``status --json``, the
log's first line), to retype in a fresh shell: each option as typed, and in front what no option
says (cache roots that differ or that only a variable sets, the hub endpoints the job pinned),
shell-quoted, passwords hidden."""

from __future__ import annotations


def describe_request(request) -> str:
    """The ``prefetch get`` command line equivalent to ``request``."""
    import shlex  # only when starting a job: `prefetch status` starts faster without it

    from prefetch.flow.request import shown_url

    parts = ["prefetch", "get", *(shown_url(n) for n in request.names)]
    torchvision = any(n[:12].lower() == "torchvision:" for n in request.names)
    timeout = None if request.timeout is None else f"{request.timeout:g}"
    # (option, value): each given one, as typed; a list: the option once per value.
    for option, value in (("--cache-dir", _shown_cache_dir(request)),
                          ("--mirror", [shown_url(m) for m in request.mirrors]),  # (a private mirror's login hidden)
                          ("--seed", request.seed), ("--connections", request.connections or None),
                          ("--host-connections", request.host_connections), ("--sha256", request.sha256),
                          ("--md5", request.md5), ("-o", request.output), ("--registry", request.registries),
                          ("--include", request.include), ("--exclude", request.exclude),
                          ("--lfs-from", request.lfs_from), ("--root", request.root if torchvision else None),
                          ("--retries", request.retries), ("--timeout", timeout)):
        for v in (value if isinstance(value, list) else [] if value is None else [value]):
            parts += [option, str(v)]
    flags = (("--also-origin", request.also_origin), ("--fail-fast", request.fail_fast),
             ("--torch-hub", request.torch_hub), ("--force", request.force), ("--no-nice", request.nice is False))
    parts += [flag for flag, on in flags if on]
    from prefetch.flow.planners.urls import describe_url_options

    parts += describe_url_options(request)
    # What no option says, set before `prefetch`: cache roots, and the hub endpoints the job pinned.
    roots = _differing_roots(request) + _env_roots(request) + _env_endpoints(request)
    return "".join(f"{name}={shlex.quote(value)} " for name, value in roots) + shlex.join(parts) + " -b"


def _kinds(request) -> set[str]:
    """The kinds of the request's names (``dataset``, ``hf``, ``ms``, ...)."""
    from prefetch.flow.planners import planner_for

    return {planner_for(n).kind for n in request.names}


def _roots(request) -> tuple[str | None, str | None]:
    """(Keras root, Hugging Face cache) the request's names use: the first for dataset names, the
    second for ``hf://`` ones (each pinned in the record), else None."""
    kinds = _kinds(request)
    keras = request.cache_dir if "dataset" in kinds else None
    hub = getattr(request, "hub_cache", None) if "hf" in kinds else None
    return keras, hub


def _shown_cache_dir(request) -> str | None:
    """``--cache-dir`` as the command line must say it: the Keras root for dataset names, the
    Hugging Face cache for ``hf://`` ones (what the option means for them); when a request holds
    both and they differ, no one option says it (``_differing_roots``)."""
    keras, hub = _roots(request)
    if keras and hub and keras != hub:
        return None
    return keras or hub


def _differing_roots(request) -> list[tuple[str, str]]:
    """``KERAS_HOME`` and ``HF_HUB_CACHE`` for a request whose Keras root and hub cache differ
    (``--cache-dir`` would set both to one; each is pinned in the record, as a ``--cache-dir``
    is shown for one kind alone): what the command line sets before ``prefetch``."""
    keras, hub = _roots(request)
    return [("KERAS_HOME", keras), ("HF_HUB_CACHE", hub)] if keras and hub and keras != hub else []


def _env_roots(request) -> list[tuple[str, str]]:
    """``MODELSCOPE_CACHE`` for ``ms://`` names and ``NLTK_DATA`` for ``nltk:`` ones, as pinned in the
    record (the API's ``ms_cache=``/``nltk_data=``, else the launching shell's): no option of
    ``get`` says either root, so the command line sets them before ``prefetch``."""
    kinds = _kinds(request)
    roots = [("MODELSCOPE_CACHE", getattr(request, "ms_cache", None) if "ms" in kinds else None),
             ("NLTK_DATA", getattr(request, "nltk_data", None) if "nltk" in kinds else None)]
    return [(name, value) for name, value in roots if value]


def _env_endpoints(request) -> list[tuple[str, str]]:
    """``HF_ENDPOINT`` for ``hf://`` names and ``MODELSCOPE_ENDPOINT`` for ``ms://`` names or
    ``--lfs-from``, as pinned in the record from the starting shell's variables (the job asks that
    hub, ``planners/base.pinned_endpoint``): retyped in a fresh shell without them, the command
    would ask huggingface.co or modelscope.cn. Not where ``--mirror`` names the kind's endpoint (it
    wins); a password in the URL shown as ``***`` (``net.proxies.shown_proxy``)."""
    kinds = _kinds(request)
    hf, ms = getattr(request, "hub_endpoint", None), getattr(request, "ms_endpoint", None)
    # (--mirror given: one kind's endpoint, planning.py refuses it beside another kind's names)
    mirrored = kinds if request.mirrors and not request.mirrors_from_env else set()
    shown = [("HF_ENDPOINT", hf if "hf" in kinds and "hf" not in mirrored else None),
             ("MODELSCOPE_ENDPOINT", ms if ("ms" in kinds and "ms" not in mirrored) or request.lfs_from else None)]
    if not any(value for _name, value in shown):
        return []
    from prefetch.net.proxies import shown_proxy

    return [(name, shown_proxy(value)) for name, value in shown if value]
