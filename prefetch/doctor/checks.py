"""``prefetch doctor``: what is configured, and why downloads or installs may fail.

Each check is a line: ok / info / warn / fail, with what is wrong and what to do.
Only ``fail`` makes ``doctor`` exit 1.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Mapping

from prefetch.doctor.proxy_checks import check_proxies
from prefetch.doctor.report import Check, DoctorReport, Level, Reachability

__all__ = ["Check", "DoctorReport", "Level", "Reachability", "check_reachability", "run_doctor"]

LOW_SPACE_BYTES = 2 * 1024**3  # the Keras datasets together need about 1 GiB with extraction


def run_doctor(
    *,
    config_dir: Path,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    deadline: float = 3.0,
    cwd: Path | None = None,
    sources: bool = True,
    datasets: list[str] | None = None,
    registries: tuple[Path, ...] = (),
) -> DoctorReport:
    """Check mirrors, environment overrides, the Keras cache, reachability and dataset sources.

    ``sources``: also try every dataset source ``get`` would use for ``datasets``
    (default: all) step by step (see prefetch.doctor.sources).
    """
    env = os.environ if env is None else env
    checks: list[Check] = []
    catalog = _check_catalog(config_dir, checks)
    from prefetch.mirrors.configs.show import read_effective_mirrors

    effective = read_effective_mirrors(catalog=catalog, env=env, python=python or sys.executable, cwd=cwd)
    urls: dict[str, str] = {}  # url -> what uses it
    _check_pip(effective, checks, urls, env)
    _check_other_tools(effective, checks, urls)
    _check_env(effective.env_overrides, checks)
    check_proxies(env, checks, deadline=deadline)
    _check_dataset_mirror(env, config_dir, checks, urls if not sources else {})
    _check_keras(env, checks)
    verdicts: tuple = ()
    if sources:
        verdicts = _check_dataset_sources(env, config_dir, catalog, checks, deadline=deadline,
                                          datasets=datasets, registries=registries)
    if urls:
        for result in check_reachability(list(urls), deadline=deadline):
            who = urls[result.url]
            if result.ok:
                checks.append(Check("network", Level.OK, f"{who}: {result.url} answers ({result.detail})"))
            else:
                checks.append(
                    Check(
                        "network",
                        Level.FAIL,
                        f"{who}: {result.url} is unreachable within {deadline:g}s ({result.detail})",
                        _unreachable_hint(who),
                    )
                )
    from prefetch.doctor.hide_secrets import hide, passwords_in, settings

    return hide(DoctorReport(checks=tuple(checks), sources=verdicts), passwords_in(settings(env, effective, catalog)))


def _check_dataset_sources(env, config_dir: Path, catalog, checks: list[Check], *, deadline: float,
                           datasets: list[str] | None, registries: tuple[Path, ...]) -> tuple:
    """One line per dataset source get would use, and whether any works at all."""
    from prefetch.doctor.sources import check_sources, collect_sources
    from prefetch.errors import MirrorCatalogError, PrefetchError
    from prefetch.cache.registry import load_registry
    from prefetch.flow.request import GetRequest
    from prefetch.flow.planning import requested_mirrors, resolve_mirror

    try:
        registry = load_registry(extra_files=list(registries), config_dir=config_dir)
        default = [resolve_mirror(m, config=config_dir) for m in requested_mirrors(GetRequest(names=[]), env)]
        targets = collect_sources(registry, datasets, mirrors=default, use_origin=not default)
    except MirrorCatalogError:
        return ()  # an unusable PREFETCH_DATASET_MIRROR is reported above
    except PrefetchError as exc:
        checks.append(Check("sources", Level.FAIL, f"cannot tell the dataset sources: {exc}",
                            "fix the registry or PREFETCH_DATASET_MIRROR"))
        return ()
    configured = [m.url for m in (catalog.datasets.values() if catalog else []) if m.url not in default]
    if configured:  # named in mirrors.toml: used with --mirror NAME, so worth knowing about too
        targets += collect_sources(registry, datasets, mirrors=configured, use_origin=False)
    verdicts = check_sources(targets, deadline=deadline, env=env)
    for v in verdicts:
        what = {"blocked": f"blocked at {v.step}", "portal": "captive portal"}.get(v.verdict, v.verdict)
        line = f"{v.kind} {v.source} ({v.files} file{'s' if v.files != 1 else ''}): {what}; {v.detail}"
        checks.append(Check("source", Level.OK if v.verdict == "ok" else Level.WARN, line, v.hint))
    working = [v for v in verdicts if v.works]
    if verdicts and not working:
        no_names = all(v.verdict == "blocked" and v.step == "dns" for v in verdicts)
        checks.append(Check("sources", Level.FAIL, f"none of the {len(verdicts)} dataset sources works from here"
                            + ("; no name resolves: this machine may have no internet access (a notebook's Internet "
                               "setting off: on Kaggle, the notebook's Internet switch)" if no_names else ""),
                            "name a reachable mirror or team store: `prefetch get NAME --mirror URL|s3://...` "
                            "(PREFETCH_DATASET_MIRROR for every call)"))
    elif verdicts:
        checks.append(Check("sources", Level.OK, f"{len(working)} of {len(verdicts)} dataset sources work"))
    return tuple(verdicts)


def _unreachable_hint(who: str) -> str:
    if who.startswith(("pip", "uv")):
        return "switch to a reachable mirror: `prefetch mirror bench`, then `prefetch mirror use fastest`"
    if who.startswith("HF"):
        return "`prefetch mirror use hf-mirror --tool hf`, or unset HF_ENDPOINT"
    if who.startswith("dataset"):
        return "fix PREFETCH_DATASET_MIRROR (a name in mirrors.toml or a base URL) or unset it"
    return "check the URL and the network (proxy variables HTTP(S)_PROXY)"


def _check_catalog(config_dir: Path, checks: list[Check]):
    from prefetch.errors import MirrorCatalogError
    from prefetch.mirrors.catalog import load_catalog, user_catalog_path

    try:
        catalog = load_catalog(config_dir=config_dir)
    except MirrorCatalogError as exc:
        checks.append(Check("mirrors", Level.FAIL, str(exc), "fix that line of the file (or move the file away)"))
        return None
    user = user_catalog_path(config_dir)
    state = f"with your {user}" if user.is_file() else f"add your own in {user}"
    checks.append(
        Check("mirrors", Level.OK, f"catalog: {len(catalog.mirrors)} mirrors, {len(catalog.datasets)} dataset mirrors ({state})")
    )
    return catalog


def _check_pip(effective, checks: list[Check], urls: dict[str, str], env: Mapping[str, str]) -> None:
    pip = effective.pip
    if pip.error:
        hint = (f"fix or remove {pip.broken_config}" if pip.broken_config else
                f"install pip for this interpreter: `{pip.python or sys.executable} -m ensurepip`")
        checks.append(Check("pip", Level.WARN, f"cannot ask pip what it uses: {pip.error}", hint))
        return
    name = effective.tools[0].mirror
    label = f" ({name})" if name else ""
    checks.append(Check("pip", Level.INFO, f"pip index: {pip.index_url}{label}, set by {pip.source} (asked pip)"))
    _add_url(urls, pip.index_url, "pip index")
    for extra in pip.extra_index_urls:
        checks.append(Check("pip", Level.INFO, f"pip extra index: {extra} (pip also looks there)"))
        _add_url(urls, extra, "pip extra index")
    from prefetch.mirrors.configs.pip import command_index_urls

    for item in pip.files:
        if not item.exists:
            continue
        try:
            text = item.path.read_text(encoding="utf-8", errors="replace")
        except IsADirectoryError:  # pip skips it (asked above: its other files and defaults hold)
            checks.append(Check("pip", Level.WARN, f"{item.path} is a directory: pip reads no config there",
                                f"remove it, or make it a file, if pip should read settings from {item.path}"))
            continue
        except OSError as exc:
            checks.append(Check("pip", Level.WARN, f"{item.path} exists but cannot be read: {exc}",
                                "fix its permissions; pip will fail to read it too"))
            continue
        for section, value in command_index_urls(text):
            checks.append(
                Check("pip", Level.WARN, f"{item.path} sets [{section}] index-url = {value}, which beats"
                      f" [global] for `pip {section}`",
                      "remove it if `prefetch mirror use` should decide the index")
            )
    if env.get("PIP_INDEX_URL"):
        checks.append(
            Check("pip", Level.WARN, f"PIP_INDEX_URL={env['PIP_INDEX_URL']} overrides every pip.conf",
                  "unset it if `prefetch mirror use` should decide (notebook: `import os; os.environ.pop('PIP_INDEX_URL')`)")
        )


def _check_other_tools(effective, checks: list[Check], urls: dict[str, str]) -> None:
    for state in effective.tools[1:]:
        if state.url is None:
            broken = effective.uv.broken_config if state.tool == "uv" else None
            checks.append(Check(state.tool, Level.WARN if broken else Level.INFO, f"{state.tool}: {state.source}",
                                f"fix or remove {broken}" if broken else ""))
            continue
        label = f" ({state.mirror})" if state.mirror else ""
        checks.append(Check(state.tool, Level.INFO, f"{state.tool}: {state.url}{label}, set by {state.source}"))
        if state.tool == "hf" and effective.hf.current and not state.url.lower().startswith(("http://", "https://")):
            from prefetch.hf.names import schemeless_endpoint

            problem, fix = schemeless_endpoint(state.url).split(": set ", 1)
            checks.append(Check("hf", Level.FAIL, problem, f"set {fix}"))
        if state.detail:
            checks.append(Check(state.tool, Level.WARN, f"{state.tool}: {state.detail}",
                                "run `%env HF_ENDPOINT=...` in the running kernel, or restart it"))
        if state.tool == "uv":
            _add_url(urls, state.url, "uv index")
        elif state.tool == "hf" and (effective.hf.current or effective.hf.persisted):
            _add_url(urls, state.url, "HF_ENDPOINT")
        elif state.tool == "conda":
            _add_url(urls, state.url.rstrip("/") + "/pkgs/main/noarch/repodata.json", "conda default channel")


def _add_url(urls: dict[str, str], url: str, who: str) -> None:
    if url.startswith(("http://", "https://")) and url not in urls:
        urls[url] = who


def _check_env(overrides: dict[str, str], checks: list[Check]) -> None:
    if not overrides:
        checks.append(Check("env", Level.OK, "no environment variables override mirrors or cache paths"))
        return
    for name, value in overrides.items():
        checks.append(Check("env", Level.INFO, f"{name}={value}"))


def _check_dataset_mirror(env: Mapping[str, str], config_dir: Path, checks: list[Check], urls: dict[str, str]) -> None:
    value = env.get("PREFETCH_DATASET_MIRROR")
    if not value:
        return
    from prefetch.errors import MirrorCatalogError
    from prefetch.mirrors.catalog import resolve_dataset_mirror

    try:
        base = resolve_dataset_mirror(value, config_dir=config_dir)
    except MirrorCatalogError as exc:
        checks.append(Check("datasets", Level.FAIL, f"PREFETCH_DATASET_MIRROR: {exc}",
                            "set it to a [datasets.NAME] from mirrors.toml or a base URL, or unset it"))
        return
    checks.append(Check("datasets", Level.INFO, f"dataset mirror (default --mirror): {base}"))
    _add_url(urls, base, "dataset mirror")


def _check_keras(env: Mapping[str, str], checks: list[Check]) -> None:
    from prefetch.cache.keras import detect_keras
    from prefetch.cache.layout import datasets_dir, keras_root

    root = keras_root(env=env)
    fallback = "KERAS_HOME" in env and root == Path("/tmp/.keras") and env["KERAS_HOME"] != "/tmp/.keras"
    why = "KERAS_HOME" if "KERAS_HOME" in env and not fallback else "default"
    checks.append(Check("keras", Level.INFO, f"Keras cache root: {root} ({why}); datasets go to {datasets_dir(root)}"))
    if fallback:
        shown = repr(env["KERAS_HOME"])[1:-1][:200]
        checks.append(Check("keras", Level.WARN, f"KERAS_HOME={shown} is empty or cannot be written or created: "
                            f"Keras reads {root} instead, and prefetch places there",
                            "set KERAS_HOME to a writable directory, or unset it"))
    install = detect_keras()
    layouts = ", ".join(layout.value for layout in install.layouts)
    if install.keras is None and install.tf_keras is None:
        checks.append(Check("keras", Level.INFO, "Keras is not installed; `prefetch get` lays files out for every Keras version"))
    else:
        versions = ", ".join(
            f"{name} {version}" for name, version in (("keras", install.keras), ("tf-keras", install.tf_keras)) if version
        )
        checks.append(Check("keras", Level.INFO, f"installed: {versions}; cache layout: {layouts}"))
    if install.tf_keras and env.get("KERAS_HOME"):
        home_root = Path(env.get("HOME") or os.path.expanduser("~")) / ".keras"
        if Path(os.path.expanduser(env["KERAS_HOME"])) != home_root:
            checks.append(
                Check("keras", Level.WARN, f"tf-keras ignores KERAS_HOME and reads {home_root}",
                      "unset KERAS_HOME, or `prefetch get --cache-dir ~/.keras` for tf-keras code")
            )
    _check_writable(datasets_dir(root), checks)


def _check_writable(directory: Path, checks: list[Check]) -> None:
    from prefetch.fs.paths import nearest_existing

    existing = nearest_existing(directory)
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        checks.append(
            Check("cache", Level.FAIL, f"cannot write to {directory} ({existing} is not a writable directory)",
                  "set KERAS_HOME to a writable directory, or pass --cache-dir")
        )
        return
    from prefetch.fs.files import free_space
    from prefetch.ui.render import human_bytes

    free = free_space(existing)
    if free < LOW_SPACE_BYTES:
        checks.append(
            Check("cache", Level.WARN, f"{directory} is writable but only {human_bytes(free)} free",
                  "free space, or point KERAS_HOME / --cache-dir at a bigger disk (cifar100 alone needs ~0.3 GiB)")
        )
    else:
        checks.append(Check("cache", Level.OK, f"{directory} is writable; {human_bytes(free)} free"))


def check_reachability(urls: list[str], *, deadline: float) -> list[Reachability]:
    """GET each URL (headers only) in parallel; any HTTP answer counts as reachable."""
    results: dict[str, Reachability] = {}
    lock = threading.Lock()

    def probe(url: str) -> None:
        from prefetch.errors import NetworkError
        from prefetch.net.http import Client, Timeouts, follow_redirects
        from prefetch.net.failures import TransientHTTPError

        start = time.monotonic()
        try:
            with Client() as client:
                response, _ = follow_redirects(client, url, timeouts=Timeouts(deadline, deadline))
                response.close()
            detail = f"HTTP {response.status}, {(time.monotonic() - start) * 1000:.0f} ms"
            outcome = Reachability(url, True, detail)
        except TransientHTTPError as exc:
            outcome = Reachability(url, False, exc.cause)
        except NetworkError as exc:
            outcome = Reachability(url, False, str(exc))
        with lock:
            results[url] = outcome

    threads = [threading.Thread(target=probe, args=(u,), daemon=True) for u in urls]
    for thread in threads:
        thread.start()
    stop = time.monotonic() + deadline + 1.0
    for thread in threads:
        thread.join(max(0.0, stop - time.monotonic()))
    with lock:
        return [results.get(u, Reachability(u, False, "no answer within the deadline")) for u in urls]
