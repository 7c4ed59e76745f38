"""pip: which pip.conf to write, the minimal edit, what overrides it, and what pip really uses.

pip reads, lowest to highest: global files, user files (legacy ``~/.pip/pip.conf``
then ``$XDG_CONFIG_HOME/pip/pip.conf``), the site file (``sys.prefix/pip.conf``),
``PIP_CONFIG_FILE`` (when that file exists the user files are skipped), then
``PIP_*`` variables. ``[install]`` beats ``[global]`` for ``pip install``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from prefetch.mirrors.configs.ini import (
    get_ini_value,
    pip_parse_error,
    read_ini_values,
    remove_ini_key,
    set_ini_value,
)
from prefetch.errors import LocalFileError, UsageError

SCOPES = ("user", "site", "global")
DEFAULT_INDEX = "https://pypi.org/simple"
_COMMAND_SECTIONS = ("install", "download")


@dataclass(frozen=True)
class PipFile:
    """A config file pip reads, in pip's load order."""

    variant: str  # global, user, site, env
    path: Path
    exists: bool


@dataclass(frozen=True)
class PipEffective:
    """What pip itself says it will use (``pip config list`` / ``debug``)."""

    index_url: str
    source: str  # "PIP_INDEX_URL", a file path, or "pip default"
    section: str  # global / install / :env: / default
    extra_index_urls: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    files: tuple[PipFile, ...] = ()
    python: str = ""
    error: str | None = None  # set when pip could not be asked
    broken_config: str | None = None  # a config file pip cannot load (every pip command fails so)


@dataclass(frozen=True)
class PipEdit:
    """The new text of a pip.conf, plus the trusted hosts it now carries for us."""

    text: str
    hosts_added: tuple[str, ...] = field(default_factory=tuple)


def _is_windows(platform: str) -> bool:
    return platform.startswith("win")


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def pip_config_files(
    *, env: Mapping[str, str] | None = None, prefix: str | None = None, platform: str | None = None
) -> list[PipFile]:
    """The files pip would read, in its load order (later wins), honouring PIP_CONFIG_FILE."""
    env = os.environ if env is None else env
    prefix = sys.prefix if prefix is None else prefix
    platform = sys.platform if platform is None else platform
    name = "pip.ini" if _is_windows(platform) else "pip.conf"
    files: list[tuple[str, Path]] = []
    config_file = env.get("PIP_CONFIG_FILE")
    if config_file == os.devnull:
        return []
    if _is_windows(platform):
        program_data = env.get("PROGRAMDATA", r"C:\ProgramData")
        files.append(("global", Path(program_data) / "pip" / name))
    else:
        dirs = env.get("XDG_CONFIG_DIRS") or "/etc/xdg"
        files += [("global", Path(d) / "pip" / name) for d in dirs.split(os.pathsep) if d]
        files.append(("global", Path("/etc") / name))
    if not (config_file and Path(config_file).exists()):
        files += [("user", p) for p in _user_files(env=env, platform=platform)]
    files.append(("site", Path(prefix) / name))
    if config_file:
        files.append(("env", Path(config_file)))
    return [PipFile(variant=v, path=p, exists=p.exists()) for v, p in files]


def _user_files(*, env: Mapping[str, str], platform: str) -> list[Path]:
    home = _home(env)
    if _is_windows(platform):
        appdata = env.get("APPDATA") or str(home / "AppData" / "Roaming")
        return [home / "pip" / "pip.ini", Path(appdata) / "pip" / "pip.ini"]
    legacy = home / ".pip" / "pip.conf"
    if platform == "darwin" and (home / "Library" / "Application Support" / "pip").is_dir():
        return [legacy, home / "Library" / "Application Support" / "pip" / "pip.conf"]
    xdg = env.get("XDG_CONFIG_HOME") or str(home / ".config")
    return [legacy, Path(xdg) / "pip" / "pip.conf"]


def pip_target_file(
    scope: str, *, env: Mapping[str, str] | None = None, prefix: str | None = None, platform: str | None = None
) -> Path:
    """The file ``--scope`` writes, chosen as ``pip config --<scope> set`` would.

    ``user`` is always the XDG file (``~/.config/pip/pip.conf``), the one pip reads
    last among user files; a legacy ``~/.pip/pip.conf`` is left alone and stays
    in effect for every key we do not set.

    Raises:
        UsageError: an unknown scope.
    """
    env = os.environ if env is None else env
    prefix = sys.prefix if prefix is None else prefix
    platform = sys.platform if platform is None else platform
    if scope == "user":
        return _user_files(env=env, platform=platform)[-1]
    if scope == "site":
        return Path(prefix) / ("pip.ini" if _is_windows(platform) else "pip.conf")
    if scope == "global":
        if _is_windows(platform):
            return Path(env.get("PROGRAMDATA", r"C:\ProgramData")) / "pip" / "pip.ini"
        return Path("/etc/pip.conf")
    raise UsageError(f"unknown pip scope {scope!r}; expected one of {', '.join(SCOPES)}")


def edit_pip_conf(
    text: str | None,
    *,
    index_url: str,
    trusted_host: str | None,
    drop_hosts: tuple[str, ...] = (),
    path: Path | None = None,
) -> PipEdit:
    """Set ``[global] index-url`` (and trusted-host for http mirrors), keeping everything else.

    ``drop_hosts`` are trusted hosts prefetch added earlier for another http mirror;
    they are removed so that switching to https leaves no TLS exemption behind.

    Raises:
        LocalFileError: pip cannot load the file as it is (a BOM, a duplicate section or
            key, a line before the first section...): editing it would not help pip.
    """
    text = text or ""
    _check_loadable(text, path)
    new = set_ini_value(text, "global", "index-url", index_url)
    current = get_ini_value(new, "global", "trusted-host")
    hosts = current.split() if current else []
    wanted = [h for h in hosts if h not in drop_hosts or h == trusted_host]
    added: tuple[str, ...] = ()
    if trusted_host:
        if trusted_host not in wanted:
            wanted.append(trusted_host)
            added = (trusted_host,)
        elif trusted_host in drop_hosts:
            added = (trusted_host,)  # still ours
    if wanted != hosts:
        if wanted:
            new = set_ini_value(new, "global", "trusted-host", " ".join(wanted))
        else:
            new = remove_ini_key(new, "global", "trusted-host")
    problem = pip_parse_error(new)
    if problem:  # never hand pip a file it cannot load
        raise LocalFileError(f"editing {path or 'pip.conf'} would leave a file pip cannot load ({problem}); not written")
    return PipEdit(text=new, hosts_added=added)


def _check_loadable(text: str, path: Path | None) -> None:
    where = path or "pip.conf"
    if text.startswith("\ufeff"):
        raise LocalFileError(
            f"{where} starts with a byte-order mark (BOM), so pip cannot load it (`pip config debug` says"
            " 'File contains no section headers'); save it as UTF-8 without BOM, then run the command again"
        )
    problem = pip_parse_error(text)
    if problem:
        raise LocalFileError(
            f"pip cannot load {where} as it is ({problem}); prefetch will not edit it:"
            " fix the file (`python -m pip config debug` shows it), then run the command again"
        )


def pip_override_warnings(
    target: Path,
    *,
    index_url: str,
    env: Mapping[str, str] | None = None,
    prefix: str | None = None,
    platform: str | None = None,
) -> list[str]:
    """Why pip might not use ``index_url`` after it is written to ``target``.

    Each message says what overrides it and what to do.
    """
    env = os.environ if env is None else env
    warnings = []
    if env.get("PIP_INDEX_URL") and env["PIP_INDEX_URL"].rstrip("/") != index_url.rstrip("/"):
        warnings.append(
            f"PIP_INDEX_URL={env['PIP_INDEX_URL']} is set in the environment and beats every pip.conf:"
            " pip keeps using it; unset it (in a notebook: `import os; os.environ.pop('PIP_INDEX_URL')`)"
            " or set it to the mirror"
        )
    config_file = env.get("PIP_CONFIG_FILE")
    if config_file == os.devnull:
        warnings.append(
            f"PIP_CONFIG_FILE={os.devnull}: pip reads no config file at all, so {target} has no effect;"
            " unset PIP_CONFIG_FILE"
        )
        return warnings
    files = pip_config_files(env=env, prefix=prefix, platform=platform)
    paths = [f.path for f in files]
    env_text = _read_quietly(Path(config_file)) if config_file and Path(config_file).exists() else None
    env_index = get_ini_value(env_text, "global", "index-url") if env_text else None
    env_wins = bool(env_index and env_index.rstrip("/") != index_url.rstrip("/"))
    unset = "unset PIP_CONFIG_FILE (in a notebook: `import os; os.environ.pop('PIP_CONFIG_FILE')`)"
    if env_wins:  # one line: read last, it wins over every file (the site and global files too)
        skipped = f" (and pip skips the user files including {target})" if target not in paths else ""
        warnings.append(
            f"PIP_CONFIG_FILE={config_file} sets [global] index-url = {env_index}, which pip uses{skipped}; {unset}"
        )
    elif config_file and Path(config_file).exists() and target not in paths:
        warnings.append(
            f"PIP_CONFIG_FILE={config_file} exists, so pip skips the user files including {target};"
            f" {unset} or write there with --scope site/global"
        )
    seen_target = target not in paths  # an unread target loses to every file that sets index-url
    for item in files:
        if item.path == target:
            seen_target = True  # our own file: checked on the new text by command_section_warnings
            continue
        text = _read_quietly(item.path) if item.exists else None
        if text is None:
            continue
        other = get_ini_value(text, "global", "index-url")
        if seen_target and other and other.rstrip("/") != index_url.rstrip("/") and item.variant != "env":
            warnings.append(
                f"{item.path} ({item.variant} file, read after {target} or instead of it) sets"
                f" [global] index-url = {other}"
                " and wins; remove that line, or write there with the matching --scope"
            )
        for section, value in command_index_urls(text):
            if value.rstrip("/") != index_url.rstrip("/"):
                warnings.append(
                    f"{item.path} sets [{section}] index-url = {value}, which beats [global] for"
                    f" `pip {section}`; remove that line from the file"
                )
    return warnings


def command_section_warnings(target: Path, text: str, *, index_url: str) -> list[str]:
    """``[install]``/``[download]`` index-url inside the file we write, which beats our [global]."""
    warnings = []
    for section, value in command_index_urls(text):
        if value.rstrip("/") != index_url.rstrip("/"):
            warnings.append(
                f"{target} also sets [{section}] index-url = {value}, which beats [global] for"
                f" `pip {section}`; remove that line to use the mirror"
            )
    return warnings


def command_index_urls(text: str) -> list[tuple[str, str]]:
    """``(section, url)`` for each ``[install]``/``[download]`` index-url in a pip.conf's text.

    Each beats ``[global] index-url`` for that pip command.
    """
    values = read_ini_values(text)
    return [(s, values[(s, "index-url")]) for s in _COMMAND_SECTIONS if values.get((s, "index-url"))]


def _read_quietly(path: Path) -> str | None:
    from prefetch.errors import UnsafePathError
    from prefetch.fs.safefs import read_file

    try:
        return read_file(path).decode("utf-8", errors="replace")  # a FIFO: skipped, never a hang
    except (OSError, UnsafePathError):
        return None
