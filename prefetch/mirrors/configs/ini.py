"""Minimal, byte-preserving edits of INI files such as ``pip.conf``.

configparser drops comments and reorders nothing useful back, so edits here work
on the text: only the lines of the key being changed are touched; every other
byte, comment and section stays as it was.

Lines are classified as pip's ``configparser.RawConfigParser`` reads them: a line is a
continuation of the key above when it is indented deeper than that key's line (so an
indented ``  index-url = ...`` under ``[global]`` is a key, not a continuation), blank
and comment lines end nothing, a header is ``[...]`` up to the line's last ``]`` with
its name unstripped. ``pip_parse_error`` says whether pip could load a text at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_OPTION = re.compile(r"(?P<key>.*?)\s*[=:]\s*(?P<value>.*)$")
_HEADER = re.compile(r"\[(?P<name>.+)\]")


def normalise_key(key: str) -> str:
    """pip's key spelling: case-insensitive, ``_`` same as ``-``."""
    return key.strip().lower().replace("_", "-")


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


@dataclass
class _Option:
    key: str  # normalised
    first: int  # line of ``key = value``
    stop: int  # end exclusive, after its last continuation line
    values: list[str] = field(default_factory=list)

    @property
    def value(self) -> str:
        return " ".join(v for v in self.values if v)


@dataclass
class _Section:
    name: str
    header: int
    end: int  # exclusive: the next header, or the end of the text
    level: int  # configparser's indent level after the section's last key (or header)
    options: list[_Option] = field(default_factory=list)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _scan(lines: list[str]) -> list[_Section]:
    """Sections and their keys, with line spans, as configparser reads them."""
    sections: list[_Section] = []
    current: _Option | None = None
    level = 0
    for index, raw in enumerate(lines):
        line = raw.rstrip("\r\n")
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        indent = _indent(line)
        if current is not None and indent > level:
            current.values.append(stripped)
            current.stop = index + 1
            continue
        level = indent
        header = _HEADER.match(stripped)
        if header:
            if sections:
                sections[-1].end = index
            sections.append(_Section(name=header.group("name"), header=index, end=len(lines), level=level))
            current = None
            continue
        option = _OPTION.match(stripped)
        if not sections or not option or not option.group("key"):
            current = None  # before any header, or not ``key = value``: pip cannot load this file
            continue
        current = _Option(key=normalise_key(option.group("key")), first=index, stop=index + 1)
        current.values.append(option.group("value"))
        sections[-1].options.append(current)
        sections[-1].level = level
    return sections


def pip_parse_error(text: str) -> str | None:
    """Why pip's config parser (strict ``RawConfigParser``) would refuse ``text``, or None."""
    import configparser

    try:
        configparser.RawConfigParser().read_string(text)
    except configparser.Error as exc:
        return " ".join(str(exc).split())
    return None


def read_ini_values(text: str) -> dict[tuple[str, str], str]:
    """All ``(section, normalised key) -> value`` pairs (last one wins)."""
    values: dict[tuple[str, str], str] = {}
    for section in _scan(text.splitlines(keepends=True)):
        for option in section.options:
            values[(section.name, option.key)] = option.value
    return values


def get_ini_value(text: str, section: str, key: str) -> str | None:
    """The value of ``key`` in ``section`` or None."""
    return read_ini_values(text).get((section, normalise_key(key)))


def _find(sections: list[_Section], section: str, key: str) -> tuple[_Section | None, _Option | None]:
    """The section and its last ``key`` (the one pip uses: ``index_url`` and ``index-url`` are one key)."""
    wanted = normalise_key(key)
    for item in sections:
        if item.name == section:
            matches = [option for option in item.options if option.key == wanted]
            return item, (matches[-1] if matches else None)
    return None, None


def set_ini_value(text: str, section: str, key: str, value: str) -> str:
    """Return ``text`` with ``key = value`` in ``section``, touching nothing else.

    An existing key (and its continuation lines) is replaced in place, keeping its
    indentation; a new key goes after the section's last non-blank line, indented as
    the section's keys so that it neither continues the key above nor turns the next
    header into a continuation; a missing section is appended.
    """
    newline = _newline(text)
    lines = text.splitlines(keepends=True)
    found_section, option = _find(_scan(lines), section, key)
    if found_section is not None and option is not None:
        first, stop = option.first, option.stop
        if option.value == value and stop == first + 1:
            return text
        ending = lines[stop - 1][len(lines[stop - 1].rstrip("\r\n")) :] or newline
        indent = lines[first][: _indent(lines[first])]
        return "".join(lines[:first] + [f"{indent}{key} = {value}{ending}"] + lines[stop:])
    if found_section is not None:
        insert = found_section.header + 1
        for index in range(found_section.header + 1, found_section.end):
            if lines[index].strip():
                insert = index + 1
        before = lines[:insert]
        if before and not before[-1].endswith(("\n", "\r")):
            before[-1] += newline
        anchor = found_section.options[-1].first if found_section.options else found_section.header
        indent = lines[anchor][: found_section.level]
        return "".join(before + [f"{indent}{key} = {value}{newline}"] + lines[insert:])
    prefix = text
    if prefix and not prefix.endswith(("\n", "\r")):
        prefix += newline
    if prefix.strip():
        prefix += newline
    return f"{prefix}[{section}]{newline}{key} = {value}{newline}"


def remove_ini_key(text: str, section: str, key: str) -> str:
    """Return ``text`` without ``key`` (every spelling of it, and its continuation lines) in ``section``."""
    lines = text.splitlines(keepends=True)
    found, _ = _find(_scan(lines), section, key)
    doomed = set()
    for option in found.options if found else ():
        if option.key == normalise_key(key):
            doomed.update(range(option.first, option.stop))
    return "".join(line for index, line in enumerate(lines) if index not in doomed)
