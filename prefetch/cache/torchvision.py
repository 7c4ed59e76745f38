"""torchvision's datasets and torch.hub's checkpoints: the tables (data files) and the layouts.

``torchvision.toml`` holds each dataset class's files (URLs, md5s, sizes, where they go
under the user's ``root``, what is extracted or decompressed) and torch.hub facts
(full sha256s known for some checkpoint names); ``torch_weights.toml`` holds every
weights entry of torchvision's models, generated from torchvision's own tables by
``tools/torchvision_weights.py``. Planning reads these files and never imports torch.

User registry files add or override datasets with ``[torchvision.<Class>]`` tables
(the same keys as ``torchvision.toml``'s ``[datasets.<Class>]``), and models' weights with
``[torchvision.<model>]`` tables that have ``weights`` (``[torchvision.<model>.weights.<ENTRY>]``
with ``urls``, ``sha256``, ``name``; ``default``).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Iterable, Mapping
from urllib.parse import urlsplit

from prefetch.cache.registry import check_entry, entry_hash
from prefetch.errors import RegistryError, UnknownDatasetError, UsageError
from prefetch.fs.paths import expand_path
from prefetch.model.specs import ExpectedHash
from prefetch.net.urls import check_url

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DATASETS_FILE = Path(__file__).with_name("torchvision.toml")
WEIGHTS_FILE = Path(__file__).with_name("torch_weights.toml")
_FILE_KEYS = {"name", "urls", "md5", "sha256", "size", "dir", "extract", "decompress", "keras", "split",
              "save_as", "moves", "gunzip", "extract_from"}
_DATASET_KEYS = {"description", "files", "source", "default_splits"}
_WEIGHTS_KEYS = {"description", "weights", "default", "enum"}
# torch.hub: HASH_REGEX = re.compile(r"-([a-f0-9]*)\.") searched in the file name.
_HUB_HASH = re.compile(r"-([a-f0-9]*)\.")


@dataclass(frozen=True)
class TvFile:
    """One file of a torchvision dataset and where the class expects it under ``root``."""

    name: str  # file name at the origin and on flat mirrors
    urls: tuple[str, ...]  # the class's own URLs in its order, then byte-identical copies
    expected: ExpectedHash | None
    size: int | None
    dir: str  # directory under root that holds the file ("" = root itself)
    extract: tuple[str, ...]  # directories under root to extract the archive into
    decompress: bool  # a .gz decompressed beside itself (MNIST family)
    keras: str | None  # the Keras registry dataset that holds the same bytes, if any
    split: str | None = None  # the class's split (torchvision:<Class>.<split> gets only its files)
    splits: tuple[str, ...] = ()  # every split the file belongs to (``split`` is the first)
    save_as: str | None = None  # the name under dir when the class saves it under another than ``name``
    moves: tuple[tuple[str, str], ...] = ()  # paths of the extracted tree the class moves (from, to)
    gunzip: str | None = None  # a folder of the extracted tree whose .gz files the class decompresses
    extract_from: str = ""  # a folder of the extracted tree: only its contents are placed

    @property
    def local_name(self) -> str:
        """The file's name under ``dir``."""
        return self.save_as or self.name

    @property
    def decompressed(self) -> str:
        """The name torchvision's extract_archive gives the decompressed file (``x.gz`` -> ``x``)."""
        return os.path.splitext(self.name)[0]


@dataclass(frozen=True)
class TvDataset:
    """A torchvision dataset class that downloads by itself."""

    name: str  # the class name, as typed after ``torchvision:``
    description: str
    files: tuple[TvFile, ...]
    source: str  # which file defined it
    default_splits: tuple[str, ...] = ()  # what a name without a split gets (empty: every file)


@dataclass(frozen=True)
class Weights:
    """One torchvision weights entry (``ResNet50_Weights.IMAGENET1K_V2``)."""

    model: str  # resnet50
    entry: str  # IMAGENET1K_V2
    enum: str  # ResNet50_Weights
    url: str
    mirrors: tuple[str, ...] = ()  # more URLs of the same bytes (a user registry's entry)
    sha256: str | None = None  # the full sha256 when a user registry gives it
    name: str | None = None  # the checkpoint's file name when not the URL's
    source: str = "built-in"

    @property
    def file_name(self) -> str:
        return self.name or PurePosixPath(urlsplit(self.url).path).name


@dataclass
class TorchvisionTables:
    """Datasets by class name, models' weights, and torch.hub's known hashes."""

    datasets: dict[str, TvDataset]
    weights: dict[str, dict[str, Weights]]  # model -> entry -> Weights
    defaults: dict[str, str]  # model -> its DEFAULT entry
    hub_sha256: dict[str, str]  # checkpoint file name -> full sha256 (when known)
    bad_prefixes: dict[str, str]  # checkpoint file name -> why its name's prefix is wrong
    not_covered: dict[str, str]  # dataset class -> why prefetch cannot fetch it

    def dataset(self, name: str) -> TvDataset:
        """The dataset class ``name`` (case-insensitive).

        Raises:
            UnknownDatasetError: not a class prefetch knows; says why when it is a known gap.
        """
        by_key = {k.lower(): v for k, v in self.datasets.items()}
        if name.lower() in by_key:
            return by_key[name.lower()]
        gaps = {k.lower(): (k, v) for k, v in self.not_covered.items()}
        if name.lower() in gaps:
            cls, why = gaps[name.lower()]
            raise UnknownDatasetError(f"torchvision:{cls} is not covered: {why}")
        import difflib

        known = {k.lower(): k for k in [*self.datasets, *self.weights]}
        close = [known[c] for c in difflib.get_close_matches(name.lower(), list(known), n=3, cutoff=0.6)]
        hint = f"; did you mean {', '.join('torchvision:' + c for c in close)}?" if close else ""
        raise UnknownDatasetError(f"unknown torchvision dataset class or model {name!r}{hint} "
                                  f"(the PyTorch page of the docs lists them)")

    def weights_for(self, model: str, entry: str | None) -> Weights:
        """A model's weights entry (``None``/``DEFAULT``: the default one).

        Raises:
            UnknownDatasetError: no such model or entry.
        """
        entries = self.weights[model]
        wanted = self.defaults.get(model) if entry in (None, "DEFAULT") else entry
        if wanted not in entries:
            raise UnknownDatasetError(f"torchvision:{model} has no weights {entry!r}; "
                                      f"known: {', '.join(sorted(entries))} (or DEFAULT)")
        return entries[wanted]

    def hub_expected(self, file_name: str) -> ExpectedHash | None:
        """What torch.hub's checkpoint ``file_name`` must hash to: a full sha256 when known,
        else the prefix in its name (as torch.hub checks it); None when the name has none."""
        if file_name in self.hub_sha256:
            return ExpectedHash("sha256", self.hub_sha256[file_name])
        found = _HUB_HASH.search(file_name)
        if not found or not found.group(1) or file_name in self.bad_prefixes:
            return None
        return ExpectedHash("sha256", found.group(1), prefix=True)


def torch_hub_dir(env: Mapping[str, str] | None = None) -> Path:
    """torch.hub's checkpoints dir: ``$TORCH_HOME/hub/checkpoints`` (``TORCH_HOME`` defaults to
    ``$XDG_CACHE_HOME/torch``, i.e. ``~/.cache/torch``), as ``torch.hub.get_dir`` reads it: a
    variable set but empty is used as torch uses it (``TORCH_HOME=`` is the current directory)."""
    env = os.environ if env is None else env
    if "TORCH_HOME" in env:
        home = expand_path(env["TORCH_HOME"], "TORCH_HOME")
    else:
        cache = env["XDG_CACHE_HOME"] if "XDG_CACHE_HOME" in env else os.path.join(
            env.get("HOME") or os.path.expanduser("~"), ".cache")
        home = expand_path(cache, "XDG_CACHE_HOME") / "torch"
    return home / "hub" / "checkpoints"


def given_hub_dir(hub_dir: str) -> Path:
    """``--torch-hub -P DIR``'s torch.hub dir, ``torch.hub.set_dir(DIR)``'s (checkpoints in
    ``DIR/checkpoints``), made absolute where it was given."""
    from prefetch.fs.paths import current_dir

    path = expand_path(hub_dir, "-P")
    return path if path.is_absolute() else current_dir() / path


def load_tables(*, extra_files: Iterable[Path] = (), config_dir: Path | None = None) -> TorchvisionTables:
    """The built-in tables, then ``[torchvision.*]`` tables of ``registry.toml`` and ``extra_files``.

    Raises:
        RegistryError: a file is not TOML or breaks the schema.
    """
    data = _read(DATASETS_FILE)
    weights_data = _read(WEIGHTS_FILE)
    tables = TorchvisionTables(
        datasets={n: _parse_dataset(DATASETS_FILE, n, b, "built-in") for n, b in data.get("datasets", {}).items()},
        weights={}, defaults={},
        hub_sha256=dict(data.get("hub", {}).get("sha256", {})),
        bad_prefixes=dict(data.get("hub", {}).get("bad_prefix", {})),
        not_covered=dict(data.get("not_covered", {})),
    )
    for model, body in weights_data.get("models", {}).items():
        tables.defaults[model] = body.get("default", "")
        tables.weights[model] = {e: Weights(model, e, body["enum"], url) for e, url in body["weights"].items()}
    sources = []
    if config_dir is not None and (config_dir / "registry.toml").is_file():
        sources.append(config_dir / "registry.toml")
    sources.extend(Path(p) for p in extra_files)
    for path in sources:
        own = _read(path).get("torchvision", {})
        if not isinstance(own, dict):
            raise RegistryError(f"{path}: [torchvision] must be a table of [torchvision.<Class>] tables")
        for name, body in own.items():
            if isinstance(body, dict) and "weights" in body:  # [torchvision.<model>] with weights entries
                _merge_weights(tables, path, name, body)
                continue
            tables.datasets = {k: v for k, v in tables.datasets.items() if k.lower() != name.lower()}
            tables.datasets[name] = _parse_dataset(path, name, body, str(path))
    return tables


def _merge_weights(tables: TorchvisionTables, path: Path, name: str, body: dict) -> None:
    """A user's ``[torchvision.<model>]`` with ``[torchvision.<model>.weights.<ENTRY>]`` tables (or
    ``ENTRY = "URL"``): entries added to the model (a new one, or torchvision's, whose entry of
    the same name is replaced); ``default`` names the entry ``torchvision:<model>`` gets."""
    where = f"{path}: [torchvision.{name}]"
    check_entry(where, body, _WEIGHTS_KEYS)
    model = name.lower()
    if not re.fullmatch(r"[a-z0-9_]+", model):
        raise RegistryError(f"{where}: a model name is letters, digits and _ (as torchvision.models names are)")
    entries = body["weights"]
    if not isinstance(entries, dict) or not entries:
        raise RegistryError(f"{where}: weights must be a table of ENTRY = \"URL\" or [torchvision.{name}.weights.ENTRY]")
    known = tables.weights.setdefault(model, {})
    enum = body.get("enum") or next((w.enum for w in known.values()), f"{name}_Weights")
    for entry, spec in entries.items():
        at = f"{where} weights.{entry}"
        if not re.fullmatch(r"[A-Za-z0-9_]+", entry) or entry == "DEFAULT":
            raise RegistryError(f"{at}: an entry name is letters, digits and _ (not DEFAULT)")
        spec = {"urls": [spec]} if isinstance(spec, str) else check_entry(at, spec, {"urls", "sha256", "name"})
        urls = _checked_urls(at, spec.get("urls"))
        expected = entry_hash(at, {k: v for k, v in spec.items() if k == "sha256"})
        file_name = spec.get("name")
        if file_name is not None and (not isinstance(file_name, str) or not file_name or "/" in file_name
                                      or file_name in (".", "..")):
            raise RegistryError(f"{at}: name must be a plain file name")
        known[entry] = Weights(model, entry, str(enum), urls[0], mirrors=tuple(dict.fromkeys(urls[1:])),
                               sha256=expected.hexdigest if expected else None, name=file_name, source=str(path))
    default = body.get("default")
    if default is not None:
        if default not in known:
            raise RegistryError(f"{where}: default {default!r} is not one of its weights: {', '.join(sorted(known))}")
        tables.defaults[model] = default
    elif not tables.defaults.get(model):
        tables.defaults[model] = next(iter(entries))


def _read(path: Path) -> dict:
    from prefetch.errors import UnsafePathError
    from prefetch.fs.safefs import read_file

    try:
        return tomllib.loads(read_file(path).decode("utf-8"))
    except FileNotFoundError:
        raise RegistryError(f"registry file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, UnsafePathError) as exc:
        raise RegistryError(f"cannot read registry file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path}: not valid TOML: {exc}") from None


def _parse_dataset(path: Path, name: str, body: object, label: str) -> TvDataset:
    where = f"{path}: [torchvision.{name}]" if label != "built-in" else f"{path}: [datasets.{name}]"
    if not isinstance(body, dict) or set(body) - _DATASET_KEYS:
        raise RegistryError(f"{where}: expected a table with {', '.join(sorted(_DATASET_KEYS))}")
    files = body.get("files")
    if not isinstance(files, list) or not files:
        raise RegistryError(f"{where}: needs at least one files entry")
    parsed = tuple(_parse_file(f"{where} files[{i}]", f) for i, f in enumerate(files))
    defaults = body.get("default_splits", [])
    known = {s for f in parsed for s in f.splits}
    if not isinstance(defaults, list) or not all(isinstance(d, str) and d in known for d in defaults):
        raise RegistryError(f"{where}: default_splits must list splits its files have")
    return TvDataset(name=name, description=str(body.get("description", "")), files=parsed, source=label,
                     default_splits=tuple(defaults))


def _checked_urls(where: str, urls: object) -> list[str]:
    """A table's ``urls``: a non-empty list of URLs prefetch can fetch, else RegistryError."""
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
        raise RegistryError(f"{where}: urls must be a non-empty list of URLs")
    for url in urls:
        try:
            check_url(url)
        except UsageError as exc:
            raise RegistryError(f"{where}: urls: {exc}") from None
    return urls


def _parse_file(where: str, entry: object) -> TvFile:
    entry = check_entry(where, entry, _FILE_KEYS)
    urls = _checked_urls(where, entry.get("urls"))
    name = entry.get("name") or PurePosixPath(urlsplit(urls[0]).path).name
    if not isinstance(name, str) or not name or "/" in name:
        raise RegistryError(f"{where}: name must be a plain file name")
    expected = entry_hash(where, entry)
    size = entry.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise RegistryError(f"{where}: size must be a whole number of bytes")
    folder = entry.get("dir", "")
    extract = entry.get("extract", [])
    if not isinstance(extract, list) or not all(isinstance(e, str) for e in extract):
        raise RegistryError(f"{where}: extract must be a list of directories under root")
    for rel in (folder, *extract):
        parts = PurePosixPath(rel).parts if isinstance(rel, str) else ("..",)
        if not isinstance(rel, str) or rel.startswith("/") or ".." in parts or "\\" in rel:
            raise RegistryError(f"{where}: {rel!r} must be a relative directory inside root")
    decompress = entry.get("decompress", False)
    if not isinstance(decompress, bool) or (decompress and not name.endswith((".gz", ".xz"))):
        raise RegistryError(f"{where}: decompress = true is for .gz and .xz files")
    keras, split = entry.get("keras"), entry.get("split")
    if keras is not None and not isinstance(keras, str):
        raise RegistryError(f"{where}: keras must be a Keras dataset name")
    splits = [split] if isinstance(split, str) else split if isinstance(split, list) else []
    if split is not None and (not splits or not all(isinstance(s, str) and s for s in splits)):
        raise RegistryError(f"{where}: split must be a name or a list of names")
    save_as, moves, gunzip = _parse_rearranging(where, entry, extract)
    inner = entry.get("extract_from", "")
    inner_parts = PurePosixPath(inner).parts if isinstance(inner, str) else ("..",)
    if (not isinstance(inner, str) or inner.startswith("/") or ".." in inner_parts or "\\" in inner
            or (inner and not extract)):
        raise RegistryError(f"{where}: extract_from must be a relative folder inside the archive, "
                            "with extract directories")
    return TvFile(name=name, urls=tuple(dict.fromkeys(urls)), expected=expected, size=size, dir=folder,
                  extract=tuple(extract), decompress=decompress, keras=keras, split=splits[0] if splits else None,
                  splits=tuple(splits), save_as=save_as, moves=moves, gunzip=gunzip,
                  extract_from=inner)


def _parse_rearranging(where: str, entry: dict, extract: list) -> tuple:
    """``save_as`` (a plain file name), ``moves`` (relative paths) and ``gunzip`` (a relative folder)."""
    save_as, moves, gunzip = entry.get("save_as"), entry.get("moves", {}), entry.get("gunzip")
    if save_as is not None and (not isinstance(save_as, str) or not save_as or "/" in save_as
                                or save_as in (".", "..")):
        raise RegistryError(f"{where}: save_as must be a plain file name")
    if not isinstance(moves, dict) or not all(isinstance(v, str) for v in moves.values()):
        raise RegistryError(f"{where}: moves must be a table of \"from\" = \"to\" paths")
    if gunzip is not None and not isinstance(gunzip, str):
        raise RegistryError(f"{where}: gunzip must be a folder of the archive")
    if (moves or gunzip) and not extract:
        raise RegistryError(f"{where}: moves and gunzip apply to an archive that is extracted")
    for rel in [*moves, *moves.values(), *([gunzip] if gunzip else [])]:
        parts = PurePosixPath(rel).parts
        if not rel or rel.startswith("/") or "\\" in rel or ".." in parts or "." in parts:
            raise RegistryError(f"{where}: {rel!r} must be a relative path inside the archive")
    return save_as, tuple(moves.items()), gunzip
