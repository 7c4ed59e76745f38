"""Minimal, byte-preserving edits of INI files such as ``pip.conf``.

configparser drops comments and reorders nothing useful back, so edits here work
on the text: only the lines of the key being changed are touched; every other
byte, comment and section stays as it was.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\[(?P<name>[^\]]+)\]\s*(?:[#;].*)?$")
_KEY = re.compile(r"^(?P<key>[^\s=:#;\[][^=:]*?)\s*[=:]\s*(?P<value>.*?)\s*$")


def normalise_key(key: str) -> str:
    """pip's key spelling: case-insensitive, ``_`` same as ``-``."""
    return key.strip().lower().replace("_", "-")


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _is_continuation(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and line[:1] in (" ", "\t") and not stripped.startswith(("#", ";"))


def _section_spans(lines: list[str]) -> list[tuple[str, int, int]]:
    """(name, header index, end index exclusive) for every section."""
    headers = []
    for index, line in enumerate(lines):
        match = _HEADER.match(line.rstrip("\r\n"))
        if match:
            headers.append((match.group("name").strip(), index))
    spans = []
    for position, (name, index) in enumerate(headers):
        end = headers[position + 1][1] if position + 1 < len(headers) else len(lines)
        spans.append((name, index, end))
    return spans


def _find_key(lines: list[str], start: int, end: int, key: str) -> tuple[int, int, str] | None:
    """(first line, end exclusive, joined value) of ``key`` between start and end."""
    wanted = normalise_key(key)
    index = start
    while index < end:
        line = lines[index].rstrip("\r\n")
        match = _KEY.match(line)
        if match and normalise_key(match.group("key")) == wanted:
            values = [match.group("value")]
            stop = index + 1
            while stop < end and _is_continuation(lines[stop]):
                values.append(lines[stop].strip())
                stop += 1
            return index, stop, " ".join(v for v in values if v)
        index += 1
    return None


def read_ini_values(text: str) -> dict[tuple[str, str], str]:
    """All ``(section, normalised key) -> value`` pairs (last one wins, like pip)."""
    lines = text.splitlines(keepends=True)
    values: dict[tuple[str, str], str] = {}
    for name, header, end in _section_spans(lines):
        index = header + 1
        while index < end:
            match = _KEY.match(lines[index].rstrip("\r\n"))
            if match:
                found = _find_key(lines, index, end, match.group("key"))
                assert found is not None
                values[(name, normalise_key(match.group("key")))] = found[2]
                index = found[1]
            else:
                index += 1
    return values


def get_ini_value(text: str, section: str, key: str) -> str | None:
    """The value of ``key`` in ``section`` or None."""
    return read_ini_values(text).get((section, normalise_key(key)))


def set_ini_value(text: str, section: str, key: str, value: str) -> str:
    """Return ``text`` with ``key = value`` in ``section``, touching nothing else.

    An existing key (and its continuation lines) is replaced in place; a new key
    goes after the section's last non-blank line; a missing section is appended.
    """
    newline = _newline(text)
    lines = text.splitlines(keepends=True)
    new_line = f"{key} = {value}{newline}"
    for name, header, end in _section_spans(lines):
        if name != section:
            continue
        found = _find_key(lines, header + 1, end, key)
        if found is not None:
            first, stop, old = found
            if old == value and stop == first + 1:
                return text
            ending = lines[stop - 1][len(lines[stop - 1].rstrip("\r\n")) :] or newline
            return "".join(lines[:first] + [f"{key} = {value}{ending}"] + lines[stop:])
        insert = header + 1
        for index in range(header + 1, end):
            if lines[index].strip():
                insert = index + 1
        before = lines[:insert]
        if before and not before[-1].endswith(("\n", "\r")):
            before[-1] += newline
        return "".join(before + [new_line] + lines[insert:])
    prefix = text
    if prefix and not prefix.endswith(("\n", "\r")):
        prefix += newline
    if prefix.strip():
        prefix += newline
    return f"{prefix}[{section}]{newline}{new_line}"


def remove_ini_key(text: str, section: str, key: str) -> str:
    """Return ``text`` without ``key`` (and its continuation lines) in ``section``."""
    lines = text.splitlines(keepends=True)
    for name, header, end in _section_spans(lines):
        if name != section:
            continue
        found = _find_key(lines, header + 1, end, key)
        if found is not None:
            first, stop, _ = found
            return "".join(lines[:first] + lines[stop:])
    return text
