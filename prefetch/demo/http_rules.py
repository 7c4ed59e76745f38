"""The HTTP rules the demo origin answers by: dates, names, ETags, ``Range`` and ``If-Range``.

Pure functions, as RFC 9110 and nginx have them, so the origin's handler stays about
serving and faults (``origin.py``).
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import hashlib
import re
from urllib.parse import quote

_RANGE = re.compile(r"\s*bytes\s*=\s*([0-9]*)\s*-\s*([0-9]*)\s*", re.IGNORECASE)


def http_date(timestamp: float) -> str:
    """Format a POSIX timestamp as an IMF-fixdate (the form Last-Modified uses)."""
    return email.utils.formatdate(timestamp, usegmt=True)


def parse_http_date(value: str) -> int | None:
    """Whole seconds since the epoch, or None when ``value`` is no HTTP-date."""
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.timezone.utc)
    return int(parsed.timestamp())


def normalize_name(name: str) -> str:
    """A file name as the origin keys it: no leading slash."""
    return name.lstrip("/")


def url_under(base: str, name: str) -> str:
    """The URL of ``name`` under the server root URL ``base`` (ending with a slash)."""
    return base + quote(normalize_name(name), safe="/")


def default_etag(data: bytes) -> str:
    """A strong ETag for ``data``: its quoted sha1."""
    return '"' + hashlib.sha1(data).hexdigest() + '"'


def parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """(start, end) inclusive, "unsatisfiable", or None. ``a-b``, ``a-`` and ``-n``: an
    end past the file is clipped, a suffix longer than the file is all of it. No byte
    (``a >= size``, ``b < a``, ``-0``, an empty file) is unsatisfiable. Several ranges,
    another unit or bad syntax give None: the header is ignored, as RFC 9110 allows."""
    match = _RANGE.fullmatch(header)
    if match is None or not any(match.groups()):
        return None
    first, last = match.groups()
    if not first:  # a suffix: the last ``last`` bytes
        if int(last) == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - int(last)), size - 1
    start, end = int(first), int(last) if last else size - 1
    if start >= size or end < start:
        return "unsatisfiable"
    return start, min(end, size - 1)


def if_range_matches(value: str, headers: dict[str, str]) -> bool:
    """Does ``If-Range: value`` name the representation sent with ``headers``? Strong
    ETag equality, or an HTTP-date equal to Last-Modified; weak tags never match, nor
    does a validator that is not sent. (No match: the whole file, 200.)"""
    value = value.strip()
    if value.startswith('"') or value.startswith("W/"):
        etag = headers.get("ETag")
        return etag is not None and value == etag and not etag.startswith("W/")
    date, modified = parse_http_date(value), headers.get("Last-Modified")
    return date is not None and modified is not None and date == parse_http_date(modified)
