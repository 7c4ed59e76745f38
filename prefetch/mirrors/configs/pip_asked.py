"""What pip really uses, asked of pip itself (``python -m pip config list`` and ``config
debug``): the index, the file or variable that set it, and why pip cannot answer (a config it
refuses, a FIFO it would block on, no pip at all). The files it reads are ``pip.py``'s."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping

from prefetch.mirrors.configs.ini import normalise_key, read_ini_values
from prefetch.mirrors.configs.pip import DEFAULT_INDEX, PipEffective, PipFile, _read_quietly, pip_config_files


def read_pip_effective(*, python: str | None = None, env: Mapping[str, str] | None = None) -> PipEffective:
    """Ask pip (``python -m pip config list`` and ``config debug``) which index it will use."""
    python = python or sys.executable
    run_env = dict(os.environ if env is None else env)
    run_env.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    for f in pip_config_files(env=run_env):  # pip opens its configs blocking: a FIFO there, and it never ends
        odd = _not_a_file(f.path)
        if odd:
            return _pip_unavailable(python, f"pip would wait forever on its config {f.path}: it is {odd}; remove it")
    outputs = []
    for command in (["config", "list"], ["config", "debug"]):
        try:
            done = subprocess.run(
                [python, "-m", "pip", *command],
                capture_output=True,
                text=True,
                errors="surrogateescape",  # (a config path that is not UTF-8: its bytes, as os.fsdecode gives them)
                env=run_env,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return _pip_unavailable(python, f"cannot run {python} -m pip: {exc}")
        if done.returncode != 0:
            broken = _unloadable_config(done.stderr)
            if broken:
                return PipEffective(index_url="", source="", section="", python=python, broken_config=broken[0],
                                    error=f"pip's config {broken[0]} could not be loaded ({broken[1]}): "
                                          f"every pip command fails until it is fixed")
            detail = (done.stderr.strip().splitlines() or ["no output"])[-1]
            return _pip_unavailable(python, f"`{python} -m pip {' '.join(command)}` failed: {detail}")
        outputs.append(done.stdout)
    values = parse_config_list(outputs[0])
    files, keys_by_file = parse_config_debug(outputs[1])
    index_url, section = DEFAULT_INDEX, "default"
    for candidate in (":env:", "install", "global"):
        if f"{candidate}.index-url" in values:
            index_url, section = values[f"{candidate}.index-url"], candidate
            break
    if section == ":env:":
        source = "PIP_INDEX_URL"
    elif section == "default":
        source = "pip default"
    else:
        source = _source_file(files, keys_by_file, f"{section}.index-url")
    extra = _first(values, "extra-index-url")
    trusted = _first(values, "trusted-host")
    return PipEffective(
        index_url=index_url,
        source=source,
        section=section,
        extra_index_urls=tuple(extra.split()) if extra else (),
        trusted_hosts=tuple(trusted.split()) if trusted else (),
        files=tuple(files),
        python=python,
    )


def _not_a_file(path: Path) -> str | None:
    """What ``path`` is when it is there and is a FIFO, socket or device (links followed), else None."""
    import stat

    from prefetch.fs.safefs import kind_of

    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) else kind_of(st)


def _unloadable_config(stderr: str) -> tuple[str, str] | None:
    """(path, pip's reason) when pip failed on ``Configuration file could not be loaded``, else None.

    pip names the file as ``file: 'PATH', line: N`` (no section header) or in the reason itself
    (``Source contains parsing errors: 'PATH'`` then ``[line  N]: ...``)."""
    import re

    lines = stderr.strip().splitlines()
    utf8 = re.search(r"Configuration file contains (invalid \S+ characters) in (.+?)\.?$", stderr, re.M)
    if utf8:
        return utf8.group(2), utf8.group(1)
    at = next((i for i, line in enumerate(lines) if "Configuration file could not be loaded" in line), None)
    rest = "\n".join(lines[at + 1:]) if at is not None else ""
    where = re.search(r"'([^'\n]+)'", rest)
    if where is None:
        return None
    path = where.group(1)
    reason = " ".join(lines[at + 1].replace(f"'{path}'", "it").split()).rstrip(".:")
    line = re.search(r"line:? +(\d+)", rest)
    return path, reason + (f", line {line.group(1)}" if line and "line" not in reason else "")


def _pip_unavailable(python: str, message: str) -> PipEffective:
    return PipEffective(index_url="", source="", section="", python=python, error=message)


def _first(values: dict[str, str], key: str) -> str | None:
    for section in (":env:", "install", "global"):
        if f"{section}.{key}" in values:
            return values[f"{section}.{key}"]
    return None


def parse_config_list(output: str) -> dict[str, str]:
    """``section.key='value'`` lines of ``pip config list`` as a dict."""
    values = {}
    for line in output.splitlines():
        key, sep, raw = line.partition("=")
        if not sep:
            continue
        raw = raw.strip()
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            raw = raw[1:-1]
        values[key.strip()] = raw
    return values


def parse_config_debug(output: str) -> tuple[list[PipFile], dict[Path, dict[str, str]]]:
    """Files and their keys from ``pip config debug``, in pip's load order."""
    order = {"global": 0, "user": 1, "site": 2, "env": 3}
    files: list[PipFile] = []
    keys: dict[Path, dict[str, str]] = {}
    variant = None
    current: Path | None = None
    for line in output.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            variant = line[:-1]
            current = None
        elif line.startswith("    ") and current is not None:
            key, _, value = line.strip().partition(": ")
            keys.setdefault(current, {})[key] = value
        elif line.startswith("  ") and ", exists: " in line and variant in order:
            path_text, _, exists = line.strip().rpartition(", exists: ")
            current = Path(path_text)
            files.append(PipFile(variant=variant, path=current, exists=exists.strip() == "True"))
    files.sort(key=lambda f: order[f.variant])  # stable: keeps order within a variant
    return files, keys


def _source_file(files: list[PipFile], keys: dict[Path, dict[str, str]], key: str) -> str:
    """The last file (in pip's load order) that sets ``key`` (``section.name``) itself.

    ``pip config debug`` lists under each file the keys merged so far for its whole variant,
    so with ``~/.pip/pip.conf`` and ``~/.config/pip/pip.conf`` both present, a key of the first
    is listed under the second too: each candidate's own text is checked.
    """
    section, _, name = key.partition(".")
    source = "unknown file"
    for item in files:
        if key not in keys.get(item.path, {}):
            continue
        text = _read_quietly(item.path)
        if text is None or (section, normalise_key(name)) in read_ini_values(text):
            source = str(item.path)
    return source
