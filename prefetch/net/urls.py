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
        # (a password with a / ? or # not percent-encoded ends the host there: the parser's words
        # quote the piece of it before that, as the port)
        why = "percent-encode a / ? # or @ in the user name or password" if "@" in url else exc
        raise UsageError(f"malformed URL {_refused(url)!r}: {why}") from None
    host = parts.hostname
    if "\\" in parts.netloc:  # (Python reads past a backslash; urllib3 2.8 ends the host there, quoting what is before)
        why = "percent-encode a / ? # \\ or @ in the user name or password" if "@" in url else "a backslash in its host"
        raise UsageError(f"malformed URL {_refused(url)!r}: {why}")
    if parts.scheme not in ("http", "https") or not host:
        raise UsageError(f"malformed URL {_refused(url)!r}: expected http:// or https:// and a host")
    bad = _BAD_HOST_CHARACTER.search(host)  # (one regex, not a Python test per character: lists of thousands)
    if bad:
        shown = "a space" if bad[0] == " " else f"the character {bad[0]!r}"
        raise UsageError(f"malformed URL {_refused(url)!r}: the host {host!r} contains {shown}")
    bad = None if url.isprintable() else _CONTROL_CHARACTER.search(url)  # (isprintable: the fast common answer)
    if bad:  # (a NUL, a bell: no request can carry it; \t, \r and \n are dropped by urlsplit, as pasted)
        raise UsageError(f"malformed URL {_refused(url)!r}: it contains the control character {bad[0]!r}")


def _refused(url: str) -> str:
    """A URL ``check_url`` refuses, for its message: everything up to its last ``@`` after the
    scheme as ``***`` (a password holding a / ? or #, which ends the host for a parser, is not
    where ``redact_url`` or the error line's scrub looks for it)."""
    if "@" not in url:
        return url
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}***@{rest.rpartition('@')[2]}" if sep else "***@" + url.rpartition("@")[2]


def shown_unchecked(url: str) -> str:
    """``url`` (or a local path) for a message before ``check_url`` took it: everything up to its
    last ``@`` after the scheme hidden (``_refused``: a password a / ? # or quote cuts short, where
    the error line's scrub does not look) and a signed query as ``(signed)``."""
    shown = _refused(url) if "://" in url else url
    try:
        return redact_url(shown)
    except ValueError:  # (a bracket a host never closes)
        return shown


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


# Query parameters that are a credential of their own, never a part of which file a link names:
# an API key (Google APIs ``key``; ``api_key``, ``apikey``), a token (Civitai and portals ``token``,
# OAuth ``access_token``, GitLab ``private_token``, a Hub token in the query), a password. The
# same file asked with another key is the same link; a record beside the file never holds one.
_CREDENTIAL_PARAMS = frozenset(("key", "api_key", "apikey", "api-key", "x-api-key", "token", "access_token",
                                "private_token", "auth_token", "authtoken", "refresh_token", "id_token",
                                "hf_token", "ms_token", "access_key", "accesskey", "secret", "client_secret",
                                "password", "passwd"))
# A presigned URL's signature and key id (S3, GCS; Azure's ``sig``; CloudFront's ``Signature``).
_SIGNATURE_PARAMS = frozenset(("x-amz-signature", "x-amz-credential", "x-amz-security-token", "signature", "sig",
                               "awsaccesskeyid", "x-goog-signature", "x-goog-credential"))

# Query parameters that carry a credential: S3/GCS/Azure presigned URLs, tokens, API keys.
_SECRET_PARAMS = _SIGNATURE_PARAMS | {"se", "sp"} | _CREDENTIAL_PARAMS


# What signs a link for a while, not which file it names: a presigned URL's signature, key id,
# date and lifetime (S3, GCS, OSS), and the credentials above. ``link_key`` leaves them out. An Azure SAS's
# fields (``sv``, ``se``, ``sp``...) and a CloudFront or OSS link's ``Expires``/``Policy`` sign a
# link only beside its signature (``sig``; ``Signature``): alone, ``?sp=test`` or ``?st=2`` name a file.
_SIGNING_PARAMS = _SIGNATURE_PARAMS | {"ossaccesskeyid", "security-token"} | _CREDENTIAL_PARAMS
_SAS_PARAMS = frozenset(("sv", "st", "se", "sp", "spr", "srt", "ss", "sr", "si", "sdd", "ses", "skoid", "sktid",
                         "skt", "ske", "sks", "skv", "skdutid", "sduoid"))  # (signing with ``sig``)
_SIGNED_WITH = {"sig": _SAS_PARAMS, "signature": frozenset(("expires", "policy", "key-pair-id"))}
_SIGNING_PREFIXES = ("x-amz-", "x-goog-", "x-oss-")
# What the key left out before the eighteenth sitting: of the credentials, only ``token`` and
# ``access_token`` (a record placed then from ``?key=...`` names its link with the key in it).
_EARLIER_SIGNING_PARAMS = _SIGNATURE_PARAMS | {"ossaccesskeyid", "security-token", "token", "access_token"}
_DEFAULT_PORTS = {"http": 80, "https": 443}


@functools.lru_cache(maxsize=1024)
def link_key(url: str) -> str:
    """Which file ``url`` names, as 12 hex digits (the first 6 bytes of its blake2b of
    :func:`bare_link`), for a completion record and a resume record."""
    return _key_of(bare_link(url))


def _key_of(bare: str) -> str:
    from prefetch.fs.hashing import blake2b  # (CPython's own BLAKE2: a plain get never loads OpenSSL's hashlib)

    return blake2b(bare.encode("utf-8", "surrogateescape"), digest_size=6).hexdigest()


def same_link(key: str, url: str) -> bool:
    """``key``, a record's :func:`link_key`, names ``url``'s link: the key of it, or the key a
    version before the eighteenth sitting gave it, with its credentials (``key=``, ``api_key=``,
    ``password=``...) still in (a file it placed from such a link is still that link's file,
    not downloaded again once after the upgrade). The earlier key is computed for this
    comparison only, never written; it names the very link, its credentials included (another
    link, or the same one with another key, is not it)."""
    if key == link_key(url):
        return True
    return "?" in url and key == _key_of(_split_bare_link(url, _EARLIER_SIGNING_PARAMS))


def bare_link(url: str) -> str:
    """``url`` as the link it is, with no secret in it: without its ``user:password@``, its
    fragment, and the query parameters that sign it for a while or carry a credential (an API
    key, a token: ``_SIGNING_PARAMS``, and
    ``_SIGNED_WITH`` beside their signature: a presigned GET signed again, or a portal link with
    a new token, is the same link; ``?v=2`` is another), its scheme and host in lower case and
    without the scheme's own port (``HTTPS://Host:443/x`` is ``https://host/x``: DNS names know
    no case). What a resume record beside the file keeps (whoever reads the folder reads it).

    A plain link already bare (no user, query or fragment, nothing ``urlsplit`` strips, its host
    in lower case with no default port: a list's links, one a file) is itself, without the
    split and join (~10 us each)."""
    if _plain(url) and _bare_host(url):
        return url
    return _split_bare_link(url)


@functools.lru_cache(maxsize=1024)
def _split_bare_link(url: str, signing: frozenset = _SIGNING_PARAMS) -> str:
    """:func:`bare_link` by its definition: split, stripped (of ``signing``, and what signs beside
    it), joined."""
    parts = urlsplit(url)
    names = [p.partition("=")[0].lower() for p in parts.query.split("&")] if parts.query else []
    dropped = set(signing).union(*(_SIGNED_WITH[n] for n in _SIGNED_WITH if n in names))
    kept = [p for p, n in zip(parts.query.split("&"), names) if p and n not in dropped
            and not n.startswith(_SIGNING_PREFIXES)]
    return parts._replace(netloc=_bare_netloc(parts), query="&".join(kept), fragment="").geturl()


def _bare_netloc(parts) -> str:
    """``host[:port]`` of ``parts`` in lower case, without ``user:password@`` or the scheme's own port."""
    netloc = parts.netloc.rpartition("@")[2]
    try:
        port = parts.port
    except ValueError:  # (a port check_url refuses: the key of the netloc as given)
        return netloc.lower()
    host = netloc.rpartition(":")[0] if port is not None or netloc.endswith(":") else netloc
    if port is not None and port != _DEFAULT_PORTS.get(parts.scheme):
        return f"{host.lower()}:{port}"
    return host.lower()


def _bare_host(url: str) -> bool:
    """The ``host[:port]`` of a :func:`_plain` ``url`` is as :func:`_bare_netloc` gives it."""
    netloc = url.split("/", 3)[2]
    if ":" in netloc:
        port = netloc.rpartition(":")[2]
        if not port.isdigit() or port[0] == "0" or port == ("443" if url[4] == "s" else "80"):
            return False
    return netloc == netloc.lower()


_PLAIN = re.compile(r"https?://[^@?#\[\]]*\Z")


def _plain(url: str) -> bool:
    """``url`` is what ``urlsplit`` and ``geturl`` give back unchanged, with no user, query or
    fragment (nothing stripped, no brackets to check): ``link_key`` and ``redact_url`` take it
    as it is (a list's plain links, one a file: the split and join cost ~10 us each)."""
    return _PLAIN.match(url) is not None and url.isascii() and url.isprintable() and " " not in url


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
