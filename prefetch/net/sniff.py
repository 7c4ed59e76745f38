"""Is this body the file we asked for, or a web page? Content-Type and magic bytes.

Captive portals and block pages answer any URL with ``200 text/html``. A body is
judged by what it is, not by its status: ``Content-Type: text/html`` for a name
that is not an HTML file, a body that starts like an HTML document, or first
bytes that do not match the magic of the type the name promises (zip/npz, gzip,
bz2, xz, zstd, tar, npy, HDF5, JSON). Names of no known type are judged by the
HTML sniff alone.
"""

from __future__ import annotations

SNIFF_BYTES = 512  # enough for every check below (tar's "ustar" sits at 257)

_HTML_NAMES = (".html", ".htm", ".xhtml", ".shtml")
_HTML_TYPES = ("text/html", "application/xhtml+xml")
# (name suffixes, magic prefixes, what to call it)
_MAGIC: list[tuple[tuple[str, ...], tuple[bytes, ...], str]] = [
    ((".zip", ".npz", ".whl", ".jar"), (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08"), "zip"),
    ((".gz", ".tgz"), (b"\x1f\x8b",), "gzip"),
    ((".bz2", ".tbz2", ".tbz"), (b"BZh",), "bzip2"),
    ((".xz", ".txz"), (b"\xfd7zXZ\x00",), "xz"),
    ((".zst", ".tzst"), (b"\x28\xb5\x2f\xfd",), "zstd"),
    ((".npy",), (b"\x93NUMPY",), "npy"),
    ((".h5", ".hdf5", ".keras"), (b"\x89HDF\r\n\x1a\n", b"PK\x03\x04"), "HDF5/zip"),
]
# Tags that open an HTML document (the WHATWG sniffing list), followed by a space or ">".
_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<script", b"<iframe", b"<h1", b"<div", b"<font",
                b"<table", b"<a", b"<style", b"<title", b"<b", b"<body", b"<br", b"<p", b"<!--", b"<meta",
                b"<form", b"<noscript", b"<link")


def is_html_name(name: str) -> bool:
    return name.lower().endswith(_HTML_NAMES)


def html_content_type(content_type: str | None) -> bool:
    """``Content-Type`` names an HTML document."""
    return bool(content_type) and content_type.split(";", 1)[0].strip().lower() in _HTML_TYPES


def looks_like_html(head: bytes) -> bool:
    """The first bytes of a body open an HTML document."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n\f").lower()
    for tag in _HTML_STARTS:
        if text.startswith(tag):
            rest = text[len(tag):len(tag) + 1]
            if not rest or rest in b" >\t\r\n/" or tag in (b"<!doctype html", b"<!--"):
                return True
    return False


def wrong_body(name: str, content_type: str | None, head: bytes | None, *, hashed: bool = False) -> str | None:
    """Why a body for ``name`` is not the file (None when it may well be).

    Args:
        content_type: the answer's Content-Type header.
        head: the body's first bytes when they are the file's first bytes (offset 0),
            else None (a body from the middle of a file can only be judged by its type).
        hashed: the file's hash is known, so its bytes are judged by the hash; only a web
            page is refused here (a registry may well map a name to bytes of another type).
    """
    if is_html_name(name):
        return None
    if html_content_type(content_type):
        return f"a web page (Content-Type {content_type.split(';', 1)[0].strip()})"
    if head is None or not head:
        return None
    if looks_like_html(head):
        return "a web page (its first bytes are HTML)"
    if hashed:
        return None
    lower = name.lower()
    for suffixes, magics, kind in _MAGIC:
        if lower.endswith(suffixes):
            if not any(head.startswith(m) or len(head) < len(m) and m.startswith(head) for m in magics):
                return f"not a {kind} file (first bytes {head[:8]!r})"
            return None
    if lower.endswith(".tar") and len(head) >= 512 and head[257:262] != b"ustar" and not _tar_checksum_ok(head):
        return f"not a tar file (no tar header; first bytes {head[:8]!r})"
    if lower.endswith(".json"):
        first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
        if first and first not in b'{["-0123456789tfn':
            return f"not a JSON file (first bytes {head[:8]!r})"
    return None


def _tar_checksum_ok(head: bytes) -> bool:
    """A pre-POSIX (v7) tar header: its checksum field matches its bytes."""
    try:
        recorded = int(head[148:156].split(b"\0", 1)[0].strip() or b"x", 8)
    except ValueError:
        return False
    return recorded == sum(head[:148]) + 8 * 32 + sum(head[156:512])
