"""conda: ``~/.condarc`` channels from the mirror's template, other settings kept.

The channel keys (``default_channels``, ``show_channel_urls``) are replaced by the
template; ``custom_channels`` is merged (the mirror's ``conda-forge`` and ``pytorch``
entries, every other channel of the user's kept); every other top-level key and
comment stays. An
existing ``channels`` list is the user's choice of channels and is kept (the
template only maps those names to the mirror); without one, ``channels: [defaults]``
is added.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

_REPLACED = ("default_channels", "custom_channels", "show_channel_urls")
_TOP_KEY = re.compile(r"""^(["']?)([A-Za-z_][\w.-]*)\1\s*:""")  # quoted keys are the same key to YAML
_BOM = "\ufeff"


@dataclass(frozen=True)
class CondaEffective:
    """The mirror base conda's default channels point at, if any."""

    base: str | None
    source: str


def condarc_path(*, env: Mapping[str, str] | None = None) -> Path:
    """The user's ``~/.condarc``."""
    env = os.environ if env is None else env
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".condarc"


_MIRRORED = ("conda-forge", "pytorch")
_ENTRY = re.compile(r"^\s+(['\"]?)([^'\"#:\s][^'\"#:]*?)\1\s*:\s*(\S.*?)\s*$")


def _custom_entries(lines: list[str]) -> list[str]:
    """The user's ``custom_channels`` entries other than the mirrored ones, as ``name: url`` lines."""
    head = lines[0].split(":", 1)[1].strip() if lines else ""
    items: list[tuple[str, str]] = []
    if head.startswith("{"):  # flow style: custom_channels: {a: url, b: url}, on one line or several
        flow = " ".join([head, *(_uncommented(line).strip() for line in lines[1:])])
        for item in flow[flow.index("{") + 1 : flow.rfind("}") if "}" in flow else None].split(","):
            name, _, url = item.partition(":")
            if name.strip() and url.strip():
                items.append((name.strip().strip("'\""), url.strip()))
        lines = []
    for line in lines[1:]:
        match = _ENTRY.match(line.rstrip("\r\n"))
        if match:
            items.append((match.group(2), match.group(3)))
    return [f"  {name}: {url}" for name, url in items if name not in _MIRRORED]


def render_condarc_channels(base: str, *, with_channels: bool, newline: str = "\n",
                            custom: list[str] | None = None) -> str:
    """The channel block for mirror ``base`` (TUNA's documented template) plus the user's ``custom`` channels."""
    base = base.rstrip("/")
    lines = ["# channels: written by `prefetch mirror use` (undo: prefetch mirror restore --tool conda)"]
    if with_channels:
        lines += ["channels:", "  - defaults"]
    lines += [
        "show_channel_urls: true",
        "default_channels:",
        f"  - {base}/pkgs/main",
        f"  - {base}/pkgs/r",
        f"  - {base}/pkgs/msys2",
        "custom_channels:",
        f"  conda-forge: {base}/cloud",
        f"  pytorch: {base}/cloud",
        *(custom or []),
    ]
    return newline.join(lines) + newline


def _uncommented(line: str) -> str:
    """``line`` without a ``# comment`` (a ``#`` at the start or after a space)."""
    match = re.search(r"(^|\s)#", line)
    return line[: match.start()] if match else line


def _depth(line: str) -> int:
    """How many flow brackets (``[``/``{``) ``line`` leaves open (URLs carry none)."""
    text = _uncommented(line)
    return text.count("[") + text.count("{") - text.count("]") - text.count("}")


def _blocks(lines: list[str]) -> list[tuple[str | None, int, int]]:
    """(top-level key or None, start, end exclusive) spans of a YAML mapping's text.

    A block runs over its indented and ``-`` lines, and over every line of a flow
    collection left open on it (``key: [`` ... ``]``, the bracket back at column 0).
    """
    spans: list[tuple[str | None, int, int]] = []
    index = 0
    while index < len(lines):
        match = _TOP_KEY.match(lines[index])
        if not match:
            spans.append((None, index, index + 1))
            index += 1
            continue
        stop = index + 1
        depth = _depth(lines[index])
        while stop < len(lines):
            line = lines[stop]
            if depth > 0:
                depth += _depth(line)
                stop += 1
                continue
            if line[:1] in (" ", "\t", "-") and line.strip():
                stop += 1
                continue
            if not line.strip():
                # blank lines belong to the block only if the block continues after them
                ahead = stop
                while ahead < len(lines) and not lines[ahead].strip():
                    ahead += 1
                if ahead < len(lines) and lines[ahead][:1] in (" ", "\t", "-"):
                    stop = ahead
                    continue
            break
        spans.append((match.group(2), index, stop))
        index = stop
    return spans


def edit_condarc(text: str | None, *, base: str) -> str:
    """Return ``.condarc`` text pointing conda's channels at mirror ``base``.

    A leading byte-order mark is kept and does not hide the first key (YAML skips it, so a
    second ``channels:`` would be a duplicate key, which conda's ruamel.yaml refuses).
    """
    text = text or ""
    if text.startswith(_BOM):
        return _BOM + edit_condarc(text[1:], base=base)
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    has_channels = False
    custom: list[str] = []
    marker = "# channels: written by `prefetch mirror use`"
    for key, start, end in _blocks(lines):
        if key == "channels":
            has_channels = True
        if key == "custom_channels":
            custom += _custom_entries(lines[start:end])
        if key in _REPLACED or (key is None and lines[start].startswith(marker)):
            continue
        kept.extend(lines[start:end])
    body = "".join(kept).rstrip("\r\n")
    block = render_condarc_channels(base, with_channels=not has_channels, newline=newline,
                                    custom=list(dict.fromkeys(custom)))
    return f"{body}{newline}{block}" if body else block


def conda_override_warnings(*, env: Mapping[str, str] | None = None) -> list[str]:
    """Files and variables that beat ``~/.condarc`` for channels."""
    env = os.environ if env is None else env
    warnings = []
    if env.get("CONDARC"):
        warnings.append(
            f"CONDARC={env['CONDARC']}: conda also reads that file and it beats ~/.condarc;"
            " remove its channel settings or unset CONDARC"
        )
    prefix = env.get("CONDA_PREFIX")
    if prefix and (Path(prefix) / ".condarc").is_file():
        text = _read(Path(prefix) / ".condarc")
        if re.search(r"^(default_channels|channels)\s*:", text, re.M):
            warnings.append(
                f"{Path(prefix) / '.condarc'} (the active environment's) sets channels and beats ~/.condarc;"
                " remove them there"
            )
    return warnings


def read_conda_effective(*, env: Mapping[str, str] | None = None) -> CondaEffective:
    """The base URL of the first ``default_channels`` entry in ``~/.condarc``."""
    path = condarc_path(env=env)
    try:
        text = _read(path)
    except OSError as exc:
        why = "absent" if isinstance(exc, FileNotFoundError) else f"not read: {exc.strerror or exc}"
        return CondaEffective(base=None, source=f"{path} ({why}): conda's defaults (repo.anaconda.com)")
    lines = text.splitlines()
    for key, start, end in _blocks([line + "\n" for line in lines]):
        if key == "default_channels":
            for line in lines[start + 1 : end]:
                item = line.strip().lstrip("-").strip()
                if item:
                    return CondaEffective(base=re.sub(r"/pkgs/main/?$", "", item), source=str(path))
    return CondaEffective(base=None, source=f"{path}: no default_channels, conda's defaults (repo.anaconda.com)")


def _read(path: Path) -> str:
    """A .condarc's text; never blocks on a FIFO there (OSError: not a regular file, as unreadable)."""
    from prefetch.errors import LocalFileError
    from prefetch.fs.safefs import read_file

    try:
        return read_file(path).decode("utf-8-sig", errors="replace")
    except LocalFileError:
        raise OSError(0, "not a regular file") from None
