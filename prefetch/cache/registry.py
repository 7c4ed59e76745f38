"""Dataset specs: the built-in Keras datasets plus user registry files."""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterable
from urllib.parse import urlsplit

from prefetch.errors import BadHashError, RegistryError, UnknownDatasetError, UsageError
from prefetch.model.specs import parse_hash
from prefetch.model.specs import DatasetSpec, FileSpec
from prefetch.net.urls import check_url

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

BUILTIN = Path(__file__).with_name("datasets.toml")
_FILE_KEYS = {"name", "url", "urls", "size", "sha256", "md5", "hash", "target", "also", "extract"}
_DATASET_KEYS = {"description", "files"}



@dataclass
class Registry:
    """All known datasets, built-in first, user files overriding by name."""

    datasets: dict[str, DatasetSpec] = field(default_factory=dict)

    def get(self, name: str) -> DatasetSpec:
        """Return the dataset called ``name`` (``-`` and ``_`` are interchangeable).

        Raises:
            UnknownDatasetError: no such dataset; the message suggests close names.
        """
        key = normalize_name(name)
        for known, spec in self.datasets.items():
            if normalize_name(known) == key:
                return spec
        close = difflib.get_close_matches(name, list(self.datasets), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownDatasetError(
            f"unknown dataset {name!r}{hint} (`prefetch list` shows all; a URL also works)"
        )


def normalize_name(name: str) -> str:
    """Dataset names compare case-insensitively, with ``-`` and ``_`` alike."""
    return name.strip().lower().replace("-", "_")


def load_registry(*, extra_files: Iterable[Path] = (), config_dir: Path | None = None) -> Registry:
    """Load the built-in registry, then ``registry.toml`` in the config dir, then ``extra_files``.

    Raises:
        RegistryError: a file is missing, not TOML, or breaks the schema.
    """
    registry = Registry()
    sources = [BUILTIN]
    if config_dir is not None and (config_dir / "registry.toml").is_file():
        sources.append(config_dir / "registry.toml")
    sources.extend(Path(p) for p in extra_files)
    for path in sources:
        for spec in parse_registry_file(path):
            registry.datasets[spec.name] = spec
    return registry


def parse_registry_file(path: Path) -> list[DatasetSpec]:
    """Parse and validate one registry TOML file."""
    try:
        from prefetch.errors import UnsafePathError
        from prefetch.fs.safefs import read_file

        try:
            raw = read_file(path)
        except UnsafePathError as exc:
            raise RegistryError(f"cannot read registry file {path}: {exc}") from None
        data = tomllib.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise RegistryError(f"registry file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"cannot read registry file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path}: not valid TOML: {exc}") from None
    label = "built-in" if Path(path) == BUILTIN else str(path)
    # [torchvision.NAME] tables are torchvision: names (prefetch/cache/torchvision.py reads them).
    return [_parse_dataset(path, name, body, label) for name, body in data.items() if name != "torchvision"]


def _parse_dataset(path: Path, name: str, body: object, label: str) -> DatasetSpec:
    where = f"{path}: [{name}]"
    if not isinstance(body, dict):
        raise RegistryError(f"{where}: expected a table, got {type(body).__name__}")
    unknown = set(body) - _DATASET_KEYS
    if unknown:
        raise RegistryError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: description, files")
    files = body.get("files")
    if not isinstance(files, list) or not files:
        raise RegistryError(f"{where}: needs at least one [[{name}.files]] entry")
    parsed = tuple(_parse_file(f"{where} files[{i}]", entry) for i, entry in enumerate(files))
    description = body.get("description", "")
    if not isinstance(description, str):
        raise RegistryError(f"{where}: description must be a string")
    return DatasetSpec(name=name, description=description, files=parsed, source=label)


def check_entry(where: str, entry: object, allowed: set[str]) -> dict:
    """``entry`` as a table with only ``allowed`` keys.

    Raises:
        RegistryError: not a table, or an unknown key (named, with the allowed ones).
    """
    if not isinstance(entry, dict):
        raise RegistryError(f"{where}: expected a table")
    unknown = set(entry) - allowed
    if unknown:
        raise RegistryError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(allowed))}")
    return entry


def entry_hash(where: str, entry: dict):
    """The ``sha256``/``md5``/``hash`` of an entry that takes one hash (at most one), or None.

    Raises:
        RegistryError: more than one, or not a hex digest of the right length.
    """
    hashes = entry_hashes(where, entry)
    if len(hashes) > 1:
        raise RegistryError(f"{where}: give only one of sha256, md5, hash")
    return hashes[0] if hashes else None


def entry_hashes(where: str, entry: dict) -> tuple:
    """The hashes of a dataset file's entry, sha256 first: ``sha256`` and ``md5`` (either, or both:
    the file must match each), or ``hash`` alone (its length tells the algorithm).

    Raises:
        RegistryError: ``hash`` beside another, or not a hex digest of the right length.
    """
    keys = [k for k in ("sha256", "md5", "hash") if k in entry]
    if "hash" in keys and len(keys) > 1:
        raise RegistryError(f"{where}: give hash alone, or sha256 and md5 (one of each at most)")
    hashes = []
    for key in keys:
        try:
            hashes.append(parse_hash(_string(where, entry, key), algorithm="auto" if key == "hash" else key))
        except BadHashError as exc:
            raise RegistryError(f"{where}: {key}: {exc}") from None
    return tuple(hashes)


def _parse_file(where: str, entry: object) -> FileSpec:
    entry = check_entry(where, entry, _FILE_KEYS)
    listed = _strings(where, entry, "urls")
    if "url" in entry:
        listed = [_string(where, entry, "url"), *listed]
    if not listed:
        raise RegistryError(f"{where}: needs url = \"...\" or urls = [\"...\", ...]")
    for i, one in enumerate(listed):
        _check_url(one, f"{where}: url" if i == 0 and "url" in entry else f"{where}: urls")
    listed = list(dict.fromkeys(listed))
    url = listed[0]
    size = entry.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise RegistryError(f"{where}: size must be a whole number of bytes")
    name = entry.get("name") or PurePosixPath(urlsplit(url).path).name
    if not isinstance(name, str) or not name or "/" in name:
        raise RegistryError(f"{where}: name must be a plain file name")
    target = entry.get("target", name)
    if not isinstance(target, str):
        raise RegistryError(f"{where}: target must be a string")
    for key, values in (("target", [target]), ("also", _strings(where, entry, "also")),
                        ("extract", _strings(where, entry, "extract"))):
        for rel in values:
            _check_relative(rel, f"{where}: {key}")
    hashes = entry_hashes(where, entry)
    return FileSpec(
        name=name,
        url=url,
        target=target,
        expected=hashes[0] if hashes else None,
        more_hashes=hashes[1:],
        also=tuple(_strings(where, entry, "also")),
        extract=tuple(_strings(where, entry, "extract")),
        alternates=tuple(listed[1:]),
        size=size,
    )


def _string(where: str, entry: dict, key: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise RegistryError(f"{where}: {key} must be a non-empty string")
    return value


def _strings(where: str, entry: dict, key: str) -> list[str]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RegistryError(f"{where}: {key} must be a list of strings")
    return value


def _check_relative(rel: str, where: str) -> None:
    parts = PurePosixPath(rel).parts
    if rel.startswith("/") or ".." in parts or "\\" in rel:
        raise RegistryError(f"{where} {rel!r} must stay inside the datasets directory")


def _check_url(url: str, where: str) -> None:
    try:
        check_url(url)
    except UsageError as exc:
        raise RegistryError(f"{where}: {exc}") from None


