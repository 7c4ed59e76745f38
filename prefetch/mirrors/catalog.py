"""The mirror catalog: built-in ``mirrors.toml`` plus the user's additions and overrides.

Package mirrors (``[mirrors.NAME]``) feed ``prefetch mirror use``; dataset mirrors
(``[datasets.NAME]``) feed ``prefetch get --mirror NAME``.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from prefetch.errors import MirrorCatalogError, UsageError
from prefetch.net.urls import check_url
from prefetch.cache.registry import tomllib

BUILTIN = Path(__file__).with_name("mirrors.toml")
USER_FILE_NAME = "mirrors.toml"
DEFAULT_BENCH_PROJECT = "pip"
DEFAULT_BENCH_FILE = "pip-24.0-py3-none-any.whl"
# The sha256 PyPI publishes for a bench file (pip 24.0's wheel, 2024-02-03): a mirror's bytes of
# that file are held to it, never to the mirror's own index page, which a hostile or broken
# mirror writes to fit whatever it serves.
PUBLISHED_SHA256 = {DEFAULT_BENCH_FILE: "ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc"}
# ... and its size: a mirror still sending past it is not sending that file (it would otherwise pass
# as `partial` at the deadline, unchecked, and be measured the fastest).
PUBLISHED_SIZE = {DEFAULT_BENCH_FILE: 2110226}

_MIRROR_KEYS = {"title", "pypi", "conda", "hf", "ms", "probe", "trusted_host"}
_DATASET_KEYS = {"title", "url"}
_BENCH_KEYS = {"project", "file", "sha256"}
_TOP_KEYS = {"mirrors", "datasets", "bench"}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class Mirror:
    """One package mirror: where pip/uv, conda and Hugging Face clients should go."""

    name: str
    title: str = ""
    pypi: str | None = None  # PEP 503 simple index URL
    conda: str | None = None  # anaconda base URL
    hf: str | None = None  # HF_ENDPOINT
    ms: str | None = None  # MODELSCOPE_ENDPOINT (for `get ms://... --mirror NAME`)
    probe: str | None = None  # absolute URL of the bench file, when given
    trusted_host: str | None = None  # host for pip's trusted-host (http:// only)
    source: str = "built-in"

    @property
    def tools(self) -> list[str]:
        """The tools this mirror can configure."""
        found = []
        if self.pypi:
            found += ["pip", "uv"]
        if self.conda:
            found.append("conda")
        if self.hf:
            found.append("hf")
        return found


@dataclass(frozen=True)
class DatasetMirror:
    """A base URL under which dataset files sit flat (``<url>mnist.npz``), or an ``s3://`` store."""

    name: str
    url: str  # always ends with '/'
    title: str = ""
    source: str = "built-in"


@dataclass
class MirrorCatalog:
    """All known mirrors; user files override built-in entries by name."""

    mirrors: dict[str, Mirror] = field(default_factory=dict)
    datasets: dict[str, DatasetMirror] = field(default_factory=dict)
    bench_project: str = DEFAULT_BENCH_PROJECT
    bench_file: str = DEFAULT_BENCH_FILE
    bench_sha256: str | None = None  # [bench] sha256: the user's pin for their [bench] file
    files: list[Path] = field(default_factory=list)
    user_file: Path | None = None  # where the user's additions go (may not exist yet)

    def get(self, name: str) -> Mirror:
        """Return the package mirror called ``name``.

        Raises:
            MirrorCatalogError: no such mirror; the message suggests close names.
        """
        found = _lookup(self.mirrors, name)
        if found is not None:
            return found
        raise MirrorCatalogError(
            f"unknown mirror {name!r}{_suggest(name, self.mirrors)}"
            f" (`prefetch mirror list` shows all; add your own in {self._user_hint()})"
        )

    def get_dataset(self, name: str) -> DatasetMirror:
        """Return the dataset mirror called ``name``.

        Raises:
            MirrorCatalogError: no such dataset mirror; the message suggests close names.
        """
        found = _lookup(self.datasets, name)
        if found is not None:
            return found
        known_names = ", ".join(sorted(self.datasets)) or "none defined"
        raise MirrorCatalogError(
            f"unknown dataset mirror {name!r}{_suggest(name, self.datasets)}"
            f" (known: {known_names}); give a URL, or add [datasets.{name}] url = \"...\""
            f" to {self._user_hint()}"
        )

    def _user_hint(self) -> str:
        return str(self.user_file) if self.user_file else "<config dir>/mirrors.toml"


def _lookup(entries: dict, name: str):
    """The entry whose name equals ``name`` ignoring case and surrounding blanks, else None."""
    key = name.strip().lower()
    return next((entry for known, entry in entries.items() if known.lower() == key), None)


def _suggest(name: str, known: dict) -> str:
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(close)}?" if close else ""


def user_catalog_path(config_dir: Path) -> Path:
    """The user's ``mirrors.toml`` inside ``config_dir``."""
    return Path(config_dir) / USER_FILE_NAME


def load_catalog(*, config_dir: Path | None = None, extra_files: tuple[Path, ...] = ()) -> MirrorCatalog:
    """Load the built-in catalog, then ``<config_dir>/mirrors.toml``, then ``extra_files``.

    Raises:
        MirrorCatalogError: a file is unreadable, not TOML, or breaks the schema.
    """
    catalog = MirrorCatalog(user_file=user_catalog_path(config_dir) if config_dir is not None else None)
    sources = [BUILTIN]
    if config_dir is not None and os.path.lexists(user_catalog_path(config_dir)):  # a FIFO there: an error, not ignored
        sources.append(user_catalog_path(config_dir))
    sources.extend(Path(p) for p in extra_files)
    for path in sources:
        merge_catalog_file(catalog, path)
    return catalog


def merge_catalog_file(catalog: MirrorCatalog, path: Path) -> None:
    """Parse ``path`` and add (or replace) its entries in ``catalog``.

    Raises:
        MirrorCatalogError: naming the file, the line (or key) and the problem.
    """
    path = Path(path)
    try:
        from prefetch.errors import UnsafePathError
        from prefetch.fs.safefs import read_file

        try:
            text = read_file(path).decode("utf-8-sig")  # (a BOM, as an editor on Windows writes one)
        except UnsafePathError as exc:
            raise MirrorCatalogError(f"{path}: cannot read mirror catalog: {exc}") from None
    except FileNotFoundError:
        raise MirrorCatalogError(f"{path}: mirror catalog does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise MirrorCatalogError(f"{path}: cannot read mirror catalog: {exc}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MirrorCatalogError(_syntax_message(path, exc)) from None
    source = "built-in" if path == BUILTIN else str(path)
    locator = _Locator(path, text)
    unknown = set(data) - _TOP_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise MirrorCatalogError(
            f"{locator.at(key)}: unknown top-level key {key!r}; expected [mirrors.NAME], "
            "[datasets.NAME] or [bench]"
        )
    for section in ("mirrors", "datasets", "bench"):
        if section in data and not isinstance(data[section], dict):
            raise MirrorCatalogError(f"{locator.at(section)}: {section} must be a table")
    for name, body in data.get("mirrors", {}).items():
        catalog.mirrors[name] = _parse_mirror(locator, name, body, source)
    for name, body in data.get("datasets", {}).items():
        catalog.datasets[name] = _parse_dataset(locator, name, body, source)
    bench = data.get("bench", {})
    _check_keys(locator, "bench", bench, _BENCH_KEYS)
    if "project" in bench:
        catalog.bench_project = _string(locator, "bench", bench, "project")
    if "file" in bench:
        catalog.bench_file = _string(locator, "bench", bench, "file")
        catalog.bench_sha256 = None  # (an earlier file's pin is not this file's)
    if "sha256" in bench:
        digest = _string(locator, "bench", bench, "sha256").lower()
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise MirrorCatalogError(f"{locator.at('bench', 'sha256')}: [bench] sha256 must be 64 hex digits,"
                                     f" got {bench['sha256']!r}")
        catalog.bench_sha256 = digest
    catalog.files.append(path)


def _syntax_message(path: Path, exc: Exception) -> str:
    text = str(exc)
    match = re.search(r"\(at line (\d+), column (\d+)\)", text)
    if match:
        reason = text[: match.start()].strip()
        return f"{path}:{match.group(1)}:{match.group(2)}: not valid TOML: {reason}; fix the file or remove it"
    return f"{path}: not valid TOML: {text}; fix the file or remove it"


def _parse_mirror(locator: "_Locator", name: str, body: object, source: str) -> Mirror:
    table = f"mirrors.{name}"
    _check_table(locator, table, name, body, _MIRROR_KEYS)
    values = {key: _string(locator, table, body, key) for key in _MIRROR_KEYS if key in body}
    for key in ("pypi", "conda", "hf", "ms"):
        if key in values:
            values[key] = _url(locator, table, key, values[key])
    if not any(key in values for key in ("pypi", "conda", "hf", "ms")):
        raise MirrorCatalogError(
            f"{locator.at(table)}: [{table}] needs at least one of pypi, conda, hf, ms (a URL)"
        )
    probe = values.get("probe")
    if probe is not None:
        if "://" in probe:
            probe = _url(locator, table, "probe", probe)
        elif "pypi" in values:
            probe = urljoin(values["pypi"].rstrip("/") + "/", probe)
        else:
            raise MirrorCatalogError(
                f"{locator.at(table, 'probe')}: [{table}] probe: a relative path needs a pypi URL;"
                " give an absolute URL"
            )
    trusted = values.get("trusted_host")
    pypi = values.get("pypi")
    if pypi and urlsplit(pypi).scheme == "http":
        trusted = trusted or urlsplit(pypi).hostname
    elif trusted:
        raise MirrorCatalogError(
            f"{locator.at(table, 'trusted_host')}: [{table}] trusted_host is only for http:// indexes;"
            " for https it would turn off certificate checks: remove it"
        )
    return Mirror(
        name=name,
        title=values.get("title", ""),
        pypi=pypi,
        conda=values.get("conda"),
        hf=values.get("hf"),
        ms=values.get("ms"),
        probe=probe,
        trusted_host=trusted,
        source=source,
    )


def _parse_dataset(locator: "_Locator", name: str, body: object, source: str) -> DatasetMirror:
    table = f"datasets.{name}"
    _check_table(locator, table, name, body, _DATASET_KEYS)
    if "url" not in body:
        raise MirrorCatalogError(f"{locator.at(table)}: [{table}] needs url = \"http(s)://...\"")
    url = _string(locator, table, body, "url")
    if url.lower().startswith("s3://"):  # a team store on an S3-compatible object store
        from prefetch.store.s3 import parse_store_url

        try:
            url = parse_store_url(url).url
        except UsageError as exc:
            raise MirrorCatalogError(f"{locator.at(table, 'url')}: [{table}] url: {exc}") from None
    else:
        url = _url(locator, table, "url", url)
    title = _string(locator, table, body, "title") if "title" in body else ""
    return DatasetMirror(name=name, url=url.rstrip("/") + "/", title=title, source=source)


def _check_table(locator: "_Locator", table: str, name: str, body: object, allowed: set[str]) -> None:
    """A ``[mirrors.NAME]`` or ``[datasets.NAME]`` entry: a valid name, a table, known keys only."""
    if not _NAME_RE.match(name) or name.lower() == "fastest":
        raise MirrorCatalogError(
            f"{locator.at(table)}: [{table}]: name {name!r} must be letters, digits, '.', '_' or '-'"
            " and not 'fastest'"
        )
    if not isinstance(body, dict):
        raise MirrorCatalogError(f"{locator.at(table)}: [{table}] must be a table, got {type(body).__name__}")
    _check_keys(locator, table, body, allowed)


def _check_keys(locator: "_Locator", table: str, body: dict, allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise MirrorCatalogError(
            f"{locator.at(table, unknown[0])}: [{table}] unknown key {unknown[0]!r};"
            f" allowed: {', '.join(sorted(allowed))}"
        )


def _string(locator: "_Locator", table: str, body: dict, key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value.strip():
        raise MirrorCatalogError(
            f"{locator.at(table, key)}: [{table}] {key} must be a non-empty string, got {value!r}"
        )
    return value.strip()


def _url(locator: "_Locator", table: str, key: str, value: str) -> str:
    try:
        check_url(value)
    except UsageError:
        raise MirrorCatalogError(
            f"{locator.at(table, key)}: [{table}] {key} must be an http:// or https:// URL"
            f" with a host, got {value!r}"
        ) from None
    return value


class _Locator:
    """Turns a table (and key) into ``file:line`` by scanning the TOML text.

    tomllib keeps no positions, so this finds the ``[table]`` header and the first
    ``key =`` line after it; when that fails the message still names the key.
    """

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def at(self, table: str, key: str | None = None) -> str:
        line = self._find(table, key)
        return f"{self.path}:{line}" if line else str(self.path)

    def _find(self, table: str, key: str | None) -> int | None:
        if "." not in table and key is None:
            # a top-level key or a header like [bench]
            for number, line in enumerate(self.lines, 1):
                stripped = line.strip()
                if re.match(rf"^\[{re.escape(table)}[.\]]", stripped) or re.match(
                    rf"^{re.escape(table)}\s*=", stripped
                ):
                    return number
            return None
        header = None
        wanted = _normal_table(table)
        for number, line in enumerate(self.lines, 1):
            stripped = line.strip()
            if stripped.startswith("[") and _normal_table(stripped.strip("[]").split("#")[0]) == wanted:
                header = number
                break
        if header is None:
            return None
        if key is None:
            return header
        for number in range(header + 1, len(self.lines) + 1):
            stripped = self.lines[number - 1].strip()
            if stripped.startswith("["):
                break
            if re.match(rf"^[\"']?{re.escape(key)}[\"']?\s*=", stripped):
                return number
        return header


def _normal_table(text: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in text.strip().split("."))


def resolve_dataset_mirror(name_or_url: str, *, config_dir: Path | None) -> str:
    """Return the base URL (ending in '/') for ``prefetch get --mirror NAME|URL``.

    A URL passes through (it must be http:// or https:// with a host); a name is
    looked up in ``[datasets.NAME]`` of the built-in and user catalogs.

    Raises:
        MirrorCatalogError: a malformed URL, an unknown name, or a malformed catalog.
    """
    text = name_or_url.strip()
    if text.lower().startswith("s3://"):
        from prefetch.store.s3 import parse_store_url

        try:
            return parse_store_url(text).url
        except UsageError as exc:
            raise MirrorCatalogError(str(exc)) from None
    if "://" in text:
        try:
            check_url(text)
        except UsageError:
            raise MirrorCatalogError(
                f"dataset mirror {text!r} is not an http:// or https:// URL with a host;"
                " give a base URL like https://host/path/ or a name from mirrors.toml"
            ) from None
        return text.rstrip("/") + "/"
    if not text:
        raise MirrorCatalogError("dataset mirror is empty; give a name from mirrors.toml or a URL")
    return load_catalog(config_dir=config_dir).get_dataset(text).url
