"""URLs as prefetch accepts and shows them: http(s) with a host, or a local file; no credentials in messages."""

from __future__ import annotations

import functools
import re
from urllib.parse import urlsplit

from prefetch.errors import UsageError


def check_url(url: str) -> None:
    """Accept only absolute http(s) URLs with a host, and ``file:///absolute/path``.

    Raises:
        UsageError: anything else.
    """
    if url[:5].lower() == "file:":
        from prefetch.errors import NetworkError
        from prefetch.net.local import file_url_path

        try:
            file_url_path(url)
        except NetworkError as exc:
            raise UsageError(str(exc).replace("invalid URL", "malformed URL", 1)) from None
        return
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise UsageError(f"malformed URL {url!r}: {exc}") from None
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise UsageError(f"malformed URL {url!r}: expected http:// or https:// and a host")
    bad = _BAD_HOST_CHARACTER.search(host)  # (one regex, not a Python test per character: lists of thousands)
    if bad:
        shown = "a space" if bad[0] == " " else f"the character {bad[0]!r}"
        raise UsageError(f"malformed URL {url!r}: the host {host!r} contains {shown}")
    bad = None if url.isprintable() else _CONTROL_CHARACTER.search(url)  # (isprintable: the fast common answer)
    if bad:  # (a NUL, a bell: no request can carry it; \t, \r and \n are dropped by urlsplit, as pasted)
        raise UsageError(f"malformed URL {url!r}: it contains the control character {bad[0]!r}")


# What a host never contains: whitespace (str.isspace's, as \s of a str pattern), control
# characters, DEL, and the characters that end or quote a host.
_BAD_HOST_CHARACTER = re.compile(r'[\s\x00-\x1f\x7f<>"{}|\\^`%/?#@]')
_CONTROL_CHARACTER = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def is_url(text: str) -> bool:
    """True when ``text`` looks like a URL rather than a dataset name (``file:`` included)."""
    return "://" in text or text[:5].lower() == "file:"


def is_local_path(text: str) -> bool:
    """True when ``text`` names a local file rather than a dataset or a URL: ``/x``, ``./x``, ``~/x``, ``dir/x``.

    Names of other kinds (``hf://``, ``torchvision:X``, ``nltk:X``) never match: a URL has
    ``://``, and a ``kind:`` prefix before the first ``/`` is not a path.
    """
    if not text or is_url(text):
        return False
    if text.startswith(("/", "./", "../", "~")):
        return True
    head = text.partition("/")[0]
    return "/" in text and ":" not in head


def file_url(path: str) -> str:
    """``file://`` URL of a local path (``~`` expanded; relative to the current directory)."""
    import os
    from pathlib import Path

    return Path(os.path.abspath(os.path.expanduser(path))).as_uri()


def host_of(url: str) -> str:
    """``host[:port]`` of a URL, for messages (never the ``user:password@`` part)."""
    netloc = urlsplit(url).netloc
    return netloc.rpartition("@")[2] if netloc else url


# Query parameters that carry a credential: S3/GCS/Azure presigned URLs, tokens.
_SECRET_PARAMS = ("x-amz-signature", "x-amz-credential", "x-amz-security-token", "signature", "sig",
                  "awsaccesskeyid", "x-goog-signature", "x-goog-credential", "token", "access_token", "se", "sp")


# What signs a link for a while, not which file it names: a presigned URL's signature, key id,
# date and lifetime (S3, GCS, OSS, Azure SAS), a portal's token. ``link_key`` leaves them out.
_SIGNING_PARAMS = frozenset(_SECRET_PARAMS + ("expires", "ossaccesskeyid", "security-token", "sv", "st", "spr",
                                              "srt", "ss", "sr", "skoid", "sktid", "skt", "ske", "sks", "skv"))
_SIGNING_PREFIXES = ("x-amz-", "x-goog-", "x-oss-")


@functools.lru_cache(maxsize=1024)
def link_key(url: str) -> str:
    """Which file ``url`` names, as 12 hex digits (the first 6 bytes of its blake2b), for a
    completion record: the URL without its ``user:password@``, its fragment, and the query
    parameters that sign it for a while (``_SIGNING_PARAMS``: a presigned GET signed again, or a
    portal link with a new token, is the same link; ``?v=2`` is another)."""
    from prefetch.fs.hashing import blake2b  # (CPython's own BLAKE2: a plain get never loads OpenSSL's hashlib)

    if _plain(url):
        bare = url
    else:
        parts = urlsplit(url)
        kept = [p for p in parts.query.split("&") if p and not _signing(p.partition("=")[0].lower())]
        bare = parts._replace(netloc=parts.netloc.rpartition("@")[2], query="&".join(kept), fragment="").geturl()
    return blake2b(bare.encode("utf-8", "surrogateescape"), digest_size=6).hexdigest()


_PLAIN = re.compile(r"https?://[^@?#\[\]]*\Z")


def _plain(url: str) -> bool:
    """``url`` is what ``urlsplit`` and ``geturl`` give back unchanged, with no user, query or
    fragment (nothing stripped, no brackets to check): ``link_key`` and ``redact_url`` take it
    as it is (a list's plain links, one a file: the split and join cost ~10 us each)."""
    return _PLAIN.match(url) is not None and url.isascii() and url.isprintable() and " " not in url


def _signing(name: str) -> bool:
    return name in _SIGNING_PARAMS or name.startswith(_SIGNING_PREFIXES)


def hide_signed_query(url: str) -> str:
    """``url`` with a signed query (a presigned URL's key id and signature, a SAS token) shown as
    ``(signed)``; anything else, its user name and password included, unchanged."""
    if "?" not in url or "://" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if any(p.partition("=")[0].lower() in _SECRET_PARAMS for p in parts.query.split("&")):
        return parts._replace(query="(signed)").geturl()
    return url


@functools.lru_cache(maxsize=1024)  # (a file's URL is redacted for its record, its sources and its message)
def redact_url(url: str) -> str:
    """``url`` for logs, records and messages: no ``user:password@``, no signature or token in the query."""
    if _plain(url):
        return url
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query and any(p.partition("=")[0].lower() in _SECRET_PARAMS for p in query.split("&")):
        query = "(signed)"
    return parts._replace(netloc=netloc, query=query).geturl()
