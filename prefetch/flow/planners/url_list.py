"""The ``-i`` URL list: its lines, their options and hashes, and a URL's own file name.

Input file syntax (``prefetch get -i FILE``; ``-`` reads stdin), aria2c's habit::

    # a comment; blank lines are skipped
    https://example.org/a.npz
    https://example.org/b.tar.gz  sha256=<64 hex>  out=b.tgz
    https://example.org/c.bin#md5=<32 hex>
      out=data/c.bin            # aria2c style: an indented line holds options
      checksum=sha-256=<hex>    # aria2c's spelling of a hash is accepted too

One URL per line. Options follow the URL on the same line or on indented lines
under it, as ``key=value``: ``sha256=HEX``, ``md5=HEX``, ``checksum=sha-256=HEX`` /
``checksum=md5=HEX``, ``out=NAME`` (a file name or relative path, under ``dir`` or
``-P DIR``; absolute is kept) and ``dir=DIR``. A URL may carry pip's ``#sha256=HEX`` /
``#md5=HEX`` fragment instead (fragments are never sent to the server).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Mapping
from urllib.parse import parse_qsl, urlsplit

from prefetch.errors import BadHashError, UsageError
from prefetch.model.lean import dataclass
from prefetch.model.specs import ExpectedHash, parse_hash
from prefetch.net.urls import file_url, is_local_path, is_url, shown_unchecked

_OPTIONS = ("sha256", "md5", "checksum", "out", "dir")


@dataclass
class UrlEntry:
    """One URL to download, with its own hash and output name (JSON-serialisable)."""

    url: str
    sha256: str | None = None
    md5: str | None = None
    out: str | None = None
    dir: str | None = None

    def to_dict(self) -> dict:
        # (not dataclasses.asdict: its deep copy is most of reading a list of thousands of URLs)
        return {k: v for k, v in (("url", self.url), ("sha256", self.sha256), ("md5", self.md5), ("out", self.out),
                                  ("dir", self.dir)) if v is not None}

    @classmethod
    def from_dict(cls, data: Mapping | str) -> "UrlEntry":
        if isinstance(data, str):
            return cls(url=data)
        known = cls.__dataclass_fields__
        if "url" not in data or not known.keys() >= data.keys():  # (no sets made per entry of a long list)
            raise UsageError(f"a URL entry needs 'url' and only {', '.join(sorted(known))}; got {dict(data)!r}")
        return cls(**{k: (str(v) if v is not None else None) for k, v in data.items()})


def url_file_name(url: str) -> str:
    """The file name a URL is saved under: its path's last segment (for a ``file://`` URL, the local file's name)."""
    path = urlsplit(url).path
    name = path.rpartition("/")[2]
    if name in ("", ".", ".."):  # (a trailing slash or dot segment: pathlib's reading of the path)
        name = PurePosixPath(path).name
    if url[:5].lower() == "file:":
        from urllib.parse import unquote

        # The local file's own name: its path unquoted whole (an escaped "/" or ".." in the last
        # segment is part of the path it names; unquoted alone, "..%2f..%2fx" named ../../x,
        # a copy outside -P).
        name = PurePosixPath(unquote(path)).name
    return "" if name in (".", "..") else name


def local_to_url(name: str) -> str:
    """A local path typed where a URL goes -> its ``file://`` URL (a ``#sha256=`` fragment kept); URLs unchanged."""
    base, sep, fragment = name.partition("#")
    if not is_local_path(base):
        return name
    return file_url(base) + (sep + fragment if split_fragment(name)[1] else "")


def _is_entry_url(token: str) -> bool:
    """The first word of an input-file line is a URL or an explicit local path (``/x``, ``./x``, ``~/x``)."""
    return is_url(token) or token.startswith(("/", "./", "../", "~/"))


def split_fragment(url: str) -> tuple[str, dict[str, str]]:
    """``URL#sha256=HEX`` -> (URL without the fragment, {"sha256": HEX}); other fragments stay."""
    base, sep, fragment = url.partition("#")
    if not sep:
        return url, {}
    pairs = dict(parse_qsl(fragment, keep_blank_values=True))
    hashes = {k.lower(): v for k, v in pairs.items() if k.lower() in ("sha256", "md5")}
    if not hashes:
        return url, {}
    return base, hashes


def parse_input_file(text: str, *, source: str) -> list[UrlEntry]:
    """Parse an input file (syntax in the module docstring).

    Raises:
        UsageError: a line that is not a URL or an option, an unknown option, a
            second URL on one line; the message names ``source`` and the line.
    """
    entries: list[UrlEntry] = []
    for number, raw in enumerate(text.splitlines(), 1):
        where = f"{source}:{number}"
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        tokens = stripped.split()
        indented = raw[:1].isspace()
        if indented and not _is_entry_url(tokens[0]):
            if not entries:
                raise UsageError(f"{where}: an option line before any URL: {stripped!r}")
            for token in tokens:
                _apply_option(entries[-1], token, where)
            continue
        if not _is_entry_url(tokens[0]):
            raise UsageError(
                f"{where}: expected a URL or a local path (or an indented option line), got {tokens[0]!r}"
            )
        entry = UrlEntry(url=local_to_url(tokens[0]))
        for token in tokens[1:]:
            if token.startswith("#"):
                break  # a trailing comment
            if _is_entry_url(token):
                raise UsageError(f"{where}: one URL per line (several sources for one file are not supported here)")
            _apply_option(entry, token, where)
        entries.append(entry)
    return entries


def _apply_option(entry: UrlEntry, token: str, where: str) -> None:
    key, sep, value = token.partition("=")
    key = key.strip().lower()
    if not sep or key not in _OPTIONS or not value:
        raise UsageError(
            f"{where}: unknown option {token!r}; expected sha256=HEX, md5=HEX, checksum=sha-256=HEX, out=NAME or dir=DIR"
        )
    if key == "checksum":
        algo, sep, value = value.partition("=")
        algo = algo.lower().replace("-", "")
        if not sep or algo not in ("sha256", "md5"):
            raise UsageError(f"{where}: checksum={algo}=... is not supported; use sha-256 or md5")
        key = algo
    if getattr(entry, key) not in (None, value):
        raise UsageError(f"{where}: {key} is given twice with different values")
    setattr(entry, key, value)


def entry_hashes(entry: UrlEntry, *, where: str) -> tuple[str, tuple[ExpectedHash, ...]]:
    """The URL to fetch (fragment removed) and the hashes its bytes must all match, one per
    algorithm, sha256 first (a sha256 and an md5 of the same file: both checked), from the
    entry and its fragment. ``where``: the entry's URL as given, which a message shows with no
    password (``net.urls.shown_unchecked``: it is not checked yet).

    Raises:
        UsageError / BadHashError: two values for one algorithm, or a malformed hash.
    """
    url, fragment = split_fragment(entry.url)
    given = {k: v for k, v in (("sha256", entry.sha256), ("md5", entry.md5)) if v}
    for key, value in fragment.items():
        if key in given and given[key].lower() != value.lower():
            raise UsageError(f"{shown_unchecked(where)}: the URL's #{key}= and the {key} option differ")
        given[key] = value
    try:
        return url, tuple(parse_hash(given[key], algorithm=key) for key in HASH_ORDER if key in given)
    except BadHashError as exc:
        raise BadHashError(f"{shown_unchecked(where)}: {exc}") from None


HASH_ORDER = ("sha256", "md5")  # a file's hashes, the one its download is hashed by first
