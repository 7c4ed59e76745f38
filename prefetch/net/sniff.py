"""Is this body the file we asked for, or a web page? Content-Type and magic bytes.

Captive portals and block pages answer any URL with ``200 text/html``. A body is
judged by what it is, not by its status or its Content-Type: a web page is an HTML
document where the name does not promise one, or a text body (XML, JSON, plain
text) where the name promises binary data. A binary body whose magic bytes differ
from the type the name promises (zip/npz, gzip, bz2, xz, zstd, tar, npy, HDF5) is
the server's real data (a ``.tar`` that is gzip-compressed, a shard of raw bytes):
it is kept, with a warning (:func:`unexpected_type`).
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
    if text[:1] != b"<":  # (every tag opens with it: a binary body is not tested 21 times)
        return False
    for tag in _HTML_STARTS:
        if text.startswith(tag):
            rest = text[len(tag):len(tag) + 1]
            if not rest or rest in b" >\t\r\n/" or tag in (b"<!doctype html", b"<!--"):
                return True
    return False


# Names that promise binary data: the magic table's, and common binary formats without one we check.
_BINARY_NAMES = tuple(sfx for suffixes, _, _ in _MAGIC for sfx in suffixes) + (
    ".tar", ".bin", ".pt", ".pth", ".ckpt", ".safetensors", ".pkl", ".pickle", ".parquet", ".arrow",
    ".onnx", ".tflite", ".pb", ".msgpack", ".7z", ".rar", ".lz4", ".jpg", ".jpeg", ".png", ".gif", ".webp",
    ".mp3", ".mp4", ".wav", ".flac", ".ogg", ".ubyte", ".idx", ".tfrecord", ".gguf", ".ggml",
)
# Generic binary names (no format behind them): plain text there may be real data.
_LOOSE_NAMES = (".bin",)
_CONTROL_OK = b"\t\n\r\f\x1b"


def promises_binary(name: str) -> bool:
    """The name's suffix promises binary data (an archive, an array, weights, media)."""
    lower = name.lower()
    return lower.endswith(_BINARY_NAMES) or ".ubyte" in lower or lower.endswith("-ubyte")


def looks_like_text(head: bytes) -> bool:
    """The first bytes are text (UTF-8, no NUL, hardly any control characters): HTML, XML, JSON, plain text."""
    import codecs

    if not head or b"\0" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)  # a cut last character is fine
    except UnicodeDecodeError:
        return False
    control = sum(1 for b in head if b < 32 and b not in _CONTROL_OK)
    return control * 100 <= len(head)


def _text_kind(head: bytes) -> str:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if text.startswith(b"<?xml") or text.startswith(b"<"):
        return "XML"
    if text[:1] in (b"{", b"["):
        return "JSON"
    return "plain text"


def _promised_kind(name: str) -> str:
    lower = name.lower()
    for suffixes, _, kind in _MAGIC:
        if lower.endswith(suffixes):
            return kind
    return lower.rsplit(".", 1)[-1] if "." in lower else "binary"


def wrong_body(name: str, content_type: str | None, head: bytes | None, *, hashed: bool = False,
               at_start: bool = True) -> str | None:
    """Why a body for ``name`` is a web page rather than the file (None when it may well be the file).

    Only a text body (HTML, XML, JSON, plain text) standing where the name promises binary
    data, or an HTML document where the name does not promise one, counts as a web page.
    A binary body whose magic bytes differ from the name's type is real data from the
    server: see :func:`unexpected_type` (a warning, never a failure).

    Args:
        content_type: the answer's Content-Type header.
        head: the body's first bytes (None: not read).
        hashed: the file's hash is known: only an HTML document is refused here.
        at_start: ``head`` is the file's first bytes; else it is from the middle of the file
            and only an HTML document is refused.
    """
    if is_html_name(name):
        return None
    if not head:
        if html_content_type(content_type):
            return f"a web page (Content-Type {content_type.split(';', 1)[0].strip()})"
        return None
    if looks_like_html(head):
        return "a web page (its first bytes are HTML)"
    if hashed or not at_start or not looks_like_text(head):
        return None  # binary bytes (whatever their Content-Type) are the server's data
    if promises_binary(name):
        if _text_kind(head) == "plain text" and name.lower().endswith(_LOOSE_NAMES):
            return None  # a generic name: plain text may be its data (only markup or JSON is a page)
        kind = _promised_kind(name)
        return (f"a web page ({_text_kind(head)} where a {kind} file was promised: not a {kind} file; "
                f"first bytes {head[:16]!r})")
    if html_content_type(content_type):
        return f"a web page (Content-Type {content_type.split(';', 1)[0].strip()}, text)"
    return None


def unexpected_type(name: str, head: bytes | None) -> str | None:
    """A binary body whose first bytes are not those the name promises (a warning: the bytes are kept)."""
    if not head:
        return None
    lower = name.lower()
    if lower.endswith(".json"):
        first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
        if first and first not in b'{["-0123456789tfn':
            return f"not a JSON file as its name says (first bytes {head[:8]!r})"
        return None
    if looks_like_text(head) and not promises_binary(name):
        return None
    for suffixes, magics, kind in _MAGIC:
        if lower.endswith(suffixes):
            if not any(head.startswith(m) or len(head) < len(m) and m.startswith(head) for m in magics):
                return f"not a {kind} file as its name says (first bytes {head[:8]!r})"
            return None
    if lower.endswith(".tar") and len(head) >= 512 and head[257:262] != b"ustar" and not _tar_checksum_ok(head):
        return f"not a tar file as its name says (no tar header; first bytes {head[:8]!r})"
    return None


def _tar_checksum_ok(head: bytes) -> bool:
    """A pre-POSIX (v7) tar header: its checksum field matches its bytes."""
    try:
        recorded = int(head[148:156].split(b"\0", 1)[0].strip() or b"x", 8)
    except ValueError:
        return False
    return recorded == sum(head[:148]) + 8 * 32 + sum(head[156:512])
