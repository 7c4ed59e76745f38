"""uv: the user ``uv.toml`` default index, edited with tomlkit so comments survive.

uv ignores pip.conf and ``PIP_*``. Precedence (highest first): ``UV_DEFAULT_INDEX``,
``UV_INDEX_URL``, the project's ``uv.toml`` / ``pyproject.toml [tool.uv]``, the user
``uv.toml`` (or ``UV_CONFIG_FILE``; ``UV_NO_CONFIG`` turns files off), then PyPI.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from prefetch.errors import LocalFileError

DEFAULT_INDEX = "https://pypi.org/simple"


@dataclass(frozen=True)
class UvEdit:
    """The new text of uv.toml, plus the insecure hosts it now carries for us."""

    text: str
    hosts_added: tuple[str, ...] = ()


@dataclass(frozen=True)
class UvEffective:
    """The default index uv will use, and where that comes from."""

    index_url: str
    source: str  # env var name, file path, or "uv default"
    broken_config: str | None = None  # a uv.toml uv cannot parse: every uv command fails


def uv_config_path(*, env: Mapping[str, str] | None = None, platform: str | None = None) -> Path:
    """The user-level ``uv.toml`` (``$XDG_CONFIG_HOME/uv/uv.toml`` or ``~/.config/uv/uv.toml``)."""
    env = os.environ if env is None else env
    platform = sys.platform if platform is None else platform
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    if platform.startswith("win"):
        return Path(env.get("APPDATA") or home / "AppData" / "Roaming") / "uv" / "uv.toml"
    return Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "uv" / "uv.toml"


_BOM = "\ufeff"


def _parse(text: str, path: Path | None = None) -> Any:
    import tomlkit
    from tomlkit.exceptions import ParseError

    try:
        return tomlkit.parse(text.removeprefix(_BOM))  # uv reads a file that starts with a BOM
    except ParseError as exc:
        where = path or "uv.toml"
        raise LocalFileError(f"{where}: not valid TOML ({exc}); fix it before prefetch edits it") from None


def edit_uv_toml(
    text: str | None,
    *,
    index_url: str,
    insecure_host: str | None,
    drop_hosts: tuple[str, ...] = (),
    path: Path | None = None,
) -> UvEdit:
    """Make ``index_url`` the one ``[[index]]`` with ``default = true``, keeping everything else.

    An existing default index is changed in place (its name and comments stay);
    extra default entries are removed so uv never sees two. ``insecure_host`` goes
    into ``allow-insecure-host`` for http mirrors; ``drop_hosts`` (added by us before)
    are taken out.

    Raises:
        LocalFileError: the existing file is not valid TOML.
    """
    import tomlkit

    text = text or ""
    bom = _BOM if text.startswith(_BOM) else ""  # kept in front of the edited text
    text = text.removeprefix(bom)
    doc = _parse(text, path)
    hosts = [str(h) for h in doc.get("allow-insecure-host", [])]
    wanted = [h for h in hosts if h not in drop_hosts or h == insecure_host]
    added: tuple[str, ...] = ()
    if insecure_host:
        if insecure_host not in wanted:
            wanted.append(insecure_host)
        added = (insecure_host,) if insecure_host not in hosts or insecure_host in drop_hosts else ()
    if wanted != hosts:
        if wanted:
            _set_top_level(doc, "allow-insecure-host", wanted)
        else:
            del doc["allow-insecure-host"]
    indexes = doc.get("index")
    if indexes is None:
        indexes = tomlkit.aot()
        if text.strip() and not text.endswith("\n\n"):
            doc.add(tomlkit.nl())
        doc.append("index", indexes)
    defaults = [i for i, entry in enumerate(indexes) if isinstance(entry, dict) and entry.get("default") is True]
    if defaults:
        first = indexes[defaults[0]]
        if first.get("url") != index_url:
            first["url"] = index_url
        for position in reversed(defaults[1:]):
            del indexes[position]
    else:
        entry = tomlkit.inline_table() if not isinstance(indexes, tomlkit.items.AoT) else tomlkit.table()
        entry["url"] = index_url
        entry["default"] = True
        indexes.append(entry)
    out = tomlkit.dumps(doc)
    return UvEdit(text=bom + (out if text.strip() else out.lstrip("\n")), hosts_added=added)


def _set_top_level(doc: Any, key: str, value: list[str]) -> None:
    import tomlkit

    array = tomlkit.array()
    array.extend(value)
    doc[key] = array  # tomlkit places a new top-level key before the first table


def uv_override_warnings(
    target: Path, *, index_url: str, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> list[str]:
    """Why uv might not use ``index_url`` after it is written to ``target``."""
    env = os.environ if env is None else env
    warnings = []
    for name in ("UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        value = env.get(name)
        if value and value.rstrip("/") != index_url.rstrip("/"):
            warnings.append(
                f"{name}={value} is set in the environment and beats uv.toml: uv keeps using it;"
                f" unset it (in a notebook: `import os; os.environ.pop('{name}')`) or set it to the mirror"
            )
    if env.get("UV_NO_CONFIG"):
        warnings.append(f"UV_NO_CONFIG is set: uv reads no config file, so {target} has no effect; unset it")
    if env.get("UV_CONFIG_FILE") and Path(env["UV_CONFIG_FILE"]) != target:
        warnings.append(
            f"UV_CONFIG_FILE={env['UV_CONFIG_FILE']}: uv reads that file instead of {target};"
            " unset UV_CONFIG_FILE or put the index there"
        )
    project = _project_index(Path.cwd() if cwd is None else cwd)
    if project and project[0].rstrip("/") != index_url.rstrip("/"):
        warnings.append(
            f"{project[1]} sets a default index ({project[0]}) that beats the user uv.toml inside"
            " that project; change it there"
        )
    return warnings


def uv_file_warnings(target: Path, text: str) -> list[str]:
    """Keys in our uv.toml that fight with ``[[index]] default = true``."""
    doc = _parse(text, target)
    warnings = []
    if "index-url" in doc:
        warnings.append(
            f"{target} also sets the deprecated top-level index-url = {doc['index-url']};"
            " remove it so [[index]] default = true is the only default"
        )
    pip_table = doc.get("pip")
    if isinstance(pip_table, dict) and "index-url" in pip_table:
        warnings.append(
            f"{target} sets [pip] index-url = {pip_table['index-url']}, which `uv pip` uses instead;"
            " remove it from that file"
        )
    return warnings


def _default_index(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    for entry in data.get("index", []) or []:
        if isinstance(entry, dict) and entry.get("default") is True and entry.get("url"):
            return str(entry["url"])
    if data.get("index-url"):
        return str(data["index-url"])
    return None


def _project_index(cwd: Path) -> tuple[str, Path] | None:
    from prefetch.cache.registry import tomllib

    for directory in [cwd, *cwd.parents]:
        for name in ("uv.toml", "pyproject.toml"):
            path = directory / name
            if not path.is_file():
                continue
            try:
                data = tomllib.loads(_read(path))
            except (OSError, ValueError, LocalFileError):
                return None
            if name == "pyproject.toml":
                data = data.get("tool", {}).get("uv") if isinstance(data.get("tool"), dict) else None
                if data is None:
                    continue  # uv skips a pyproject.toml without [tool.uv] and looks further up
            found = _default_index(data)
            return (found, path) if found else None
    return None


def read_uv_effective(*, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> UvEffective:
    """The default index uv will use here, following uv's precedence."""
    from prefetch.cache.registry import tomllib

    env = os.environ if env is None else env
    for name in ("UV_DEFAULT_INDEX", "UV_INDEX_URL"):
        if env.get(name):
            return UvEffective(index_url=env[name], source=name)
    if env.get("UV_NO_CONFIG"):
        return UvEffective(index_url=DEFAULT_INDEX, source="uv default (UV_NO_CONFIG set)")
    project = _project_index(Path.cwd() if cwd is None else cwd)
    if project:
        return UvEffective(index_url=project[0], source=str(project[1]))
    path = Path(env["UV_CONFIG_FILE"]) if env.get("UV_CONFIG_FILE") else uv_config_path(env=env)
    try:
        data = tomllib.loads(_read(path))
    except FileNotFoundError:
        data = {}
    except ValueError as exc:  # not TOML (or not UTF-8): uv says "Failed to parse" and does nothing
        return UvEffective(index_url=DEFAULT_INDEX, broken_config=str(path),
                           source=f"cannot parse {path} ({exc}); every uv command fails until it is fixed")
    except OSError as exc:
        return UvEffective(index_url=DEFAULT_INDEX, source=f"uv default ({path} unreadable: {exc})")
    except LocalFileError:  # a FIFO or device there: never read (it would block)
        return UvEffective(index_url=DEFAULT_INDEX, source=f"uv default ({path} unreadable: not a regular file)")
    found = _default_index(data)
    if found:
        return UvEffective(index_url=found, source=str(path))
    return UvEffective(index_url=DEFAULT_INDEX, source="uv default")


def _read(path: Path) -> str:
    """A uv config's text, never blocking on a FIFO (LocalFileError: not a regular file)."""
    from prefetch.fs.safefs import read_file

    return read_file(path).decode("utf-8-sig")
