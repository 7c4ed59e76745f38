"""Is this answer the bytes we asked for? The checks on a response's status and headers.

A 206 is accepted only when its ``Content-Range`` starts where we asked and names
the size we know; a 200 to a resumed request means the server ignored Range or
the file changed (start over); a validator (ETag / Last-Modified) that differs
from the one we hold means the file changed: with other sources left, the source
that changed is dropped instead. A web page (a captive portal, a block page: an
HTML document, or a text body where the name promises binary data; ``sniff``) is
a failing source, checked before anything else, so it never restarts the file nor costs the
partial. A 206 that honestly starts before the asked offset has its leading
bytes skipped; one that starts after it leaves the gap to the schedule. Nothing
here touches the transfer: the caller applies the :class:`Answer`.
"""

from __future__ import annotations

import re

from prefetch.model.lean import dataclass
from prefetch.net.failures import Failure, TransientHTTPError
from prefetch.net.proxies import proxy_for
from prefetch.net.urls import host_of
from prefetch.net.sniff import SNIFF_BYTES, html_content_type, is_html_name, unexpected_type, wrong_body
from prefetch.engine.sources import Restart, Source, SourceBad

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$", re.I)
_UNSATISFIED_RANGE = re.compile(r"^\s*bytes\s+\*/(\d+)\s*$", re.I)


@dataclass(frozen=True)
class Answer:
    """What an accepted response carries."""

    first: int  # offset of the body's first byte
    end: int | None  # offset after its last byte (None: until the connection closes)
    total: int | None  # the file's size, when the answer names it
    etag: str | None
    last_modified: str | None
    whole_body: bool = False  # a 200 to a Range probe: the server does not do ranges
    skip: int = 0  # leading body bytes to drop (a 206 that started before the asked offset)
    note: str | None = None  # what to log about an answer taken in another shape than asked


class WebPageError(TransientHTTPError):
    """The answer is a web page (or another type) instead of the file: a failing source."""

    def __init__(self, host: str, what: str, *, proxy: str | None = None) -> None:
        page = what.startswith("a web page")
        detail = what[len("a web page"):].strip(" ()") if page else what
        if proxy:  # the page may be the proxy's (a login or block page), or one it passed on
            where = f"from {host} through the proxy {proxy}): probably the proxy's login or block page, or a captive portal "
            hint = "check the proxy (log in through a browser), or use another proxy, network or --mirror"
            cause = f"returned {what} through the proxy {proxy}"
        else:
            where = f"from {host}): probably a captive portal or block page "
            hint = "log in through a browser, or use another network or --mirror"
            cause = f"returned {what}"
        super().__init__(
            f"the network returned {'a web page' if page else 'something else'} instead of the file "
            f"({detail}, {where}({hint})", cause=cause, kind=Failure.WEB_PAGE)


def check_body(resp, *, name: str, host: str, at_start: bool, hashed: bool = False, url: str = "") -> str | None:
    """Raise :class:`WebPageError` when ``resp``'s body is a web page rather than the file ``name``.

    ``at_start``: the body starts at the file's first byte (its bytes are judged, not its
    Content-Type). ``hashed``: the file's hash is known (then only an HTML page is refused).
    Returns a warning when the body is binary but not of the type its name promises (it
    is kept: real data from the server, such as a ``.tar`` that is gzip-compressed).
    """
    content_type = resp.headers.get("Content-Type")
    # From the middle of a file, the bytes are read only when the Content-Type says HTML.
    head = resp.peek(SNIFF_BYTES) if at_start or html_content_type(content_type) else None
    what = wrong_body(name, content_type, head, hashed=hashed, at_start=at_start)
    if what is not None:
        raise WebPageError(host, what, proxy=proxy_for(url) if url else None)
    if at_start and not hashed:
        odd = unexpected_type(name, head)
        if odd:
            return f"{name} from {host}: {odd}; kept (no hash to check it: give --sha256 to be sure)"
    return None


def check_response(resp, *, start: int, known_size: int | None, src: Source, ranged: bool,
                   others: bool, have_bytes: bool, name: str = "", end: int | None = None,
                   hashed: bool = False) -> Answer:
    """Accept ``resp`` to a request for bytes ``start-``, or raise what to do instead.

    Args:
        others: other live sources remain (a disagreeing source is then dropped, not followed).
        have_bytes: some of the file is already on disk.
        name: the file's name (its type, for the magic-bytes check).
        end: where the asked range ends (exclusive; None: the end of the file).
        hashed: the file's hash is known (a body of another type than its name is then left to it).
    Raises:
        WebPageError: a web page (a TransientHTTPError). A binary body of another type than
            the name promises is accepted, with a warning in the Answer's ``note``.
        TransientHTTPError: a wrong answer worth asking again (bad Content-Range, encoded body).
        Restart: the file changed or Range is ignored: start over (``ranges=False``: on one connection).
        SourceBad: this source disagrees with the others.
    """
    host = host_of(src.url)
    status = resp.status
    encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
    warning = None
    if encoding not in ("identity", "") and status in (200, 206) and _stored_gzip(resp, name, encoding, start):
        if start == 0:  # (said once, with the file's first answer)
            warning = (f"{host} labels {name} Content-Encoding: {encoding} (a server setting for .gz files); "
                       f"kept its bytes as sent, the stored file, as curl and wget do")
        encoding = "identity"
    if status in (200, 206):  # before any other check: a portal's page must not restart the file
        match = _CONTENT_RANGE.match(resp.headers.get("Content-Range", "")) if status == 206 else None
        at_start = status == 200 or bool(match and int(match.group(1)) == 0)
        if encoding in ("identity", ""):
            odd = check_body(resp, name=name, host=host, at_start=at_start, hashed=hashed, url=src.url)
            warning = "; ".join(n for n in (warning, odd) if n) or None
        elif html_content_type(resp.headers.get("Content-Type")) and not is_html_name(name):
            raise WebPageError(host, f"a web page (Content-Type {resp.headers['Content-Type'].split(';')[0]})",
                               proxy=proxy_for(src.url))
    etag = resp.headers.get("ETag")
    last_modified = resp.headers.get("Last-Modified")
    if status == 416:
        match = _UNSATISFIED_RANGE.match(resp.headers.get("Content-Range", ""))
        total = int(match.group(1)) if match else None
        if total == 0 and start == 0:
            return Answer(0, 0, 0, etag, last_modified)
        if total is not None and known_size is not None and total != known_size:
            raise Restart(f"{host}: file size changed from {known_size} to {total}")
        raise TransientHTTPError(f"{host} answered 416 for bytes {start}-")
    if encoding not in ("identity", ""):
        raise TransientHTTPError(f"{host} sent a {encoding}-encoded body; asked for the raw bytes",
                                 kind=Failure.BAD_ANSWER)
    if status == 206:
        match = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
        if not match:
            raise TransientHTTPError(f"{host}: 206 without a usable Content-Range", kind=Failure.BAD_ANSWER)
        first, last, total_text = int(match.group(1)), int(match.group(2)), match.group(3)
        total = None if total_text == "*" else int(total_text)
        if last < first:
            raise TransientHTTPError(f"{host}: Content-Range {first}-{last} is empty", kind=Failure.BAD_ANSWER)
        if total is None:
            raise TransientHTTPError(f"{host}: Content-Range gives no total size", kind=Failure.BAD_ANSWER)
        skip, note = 0, None
        if first != start:
            note = (f"{host}: Content-Range {first}-{last} does not match the request for {start}-; "
                    f"using the bytes where they belong")
            # Honest bytes at another offset: those before ``start`` are skipped, and a
            # later start leaves the gap to the schedule. Bytes beyond the asked range
            # (or an answer that holds none of it) are of no use here.
            if first < start <= last:
                skip, first = start - first, start
            elif not (start < first < (end if end is not None else (known_size or total))):
                src.bad_ranges += 1
                what = f"{host}: Content-Range {first}-{last} does not match the request for {start}-"
                if src.bad_ranges < 2:
                    raise TransientHTTPError(what, kind=Failure.BAD_ANSWER)
                if others:
                    raise SourceBad(f"{what} (again)")
                raise Restart(f"{what} (again); one stream from 0 without ranges", ranges=False)
        if known_size is not None and total != known_size:
            if others:
                raise SourceBad(f"{host} has a different size ({total} bytes, expected {known_size})")
            raise Restart(f"{host}: file size changed from {known_size} to {total}; restarting from 0")
        _check_validator(src, etag, last_modified, others=others, have_bytes=have_bytes, hashed=hashed)
        note = "; ".join(n for n in (warning, note) if n) or None
        return Answer(first, last + 1, total, etag, last_modified, skip=skip, note=note)
    if status == 200:
        length = resp.headers.get("Content-Length")
        total = int(length) if length and length.isdigit() else None
        if total is None and "chunked" not in resp.headers.get("Transfer-Encoding", "").lower() and not resp.peek(1):
            # The body ends at the close, and the close came at once: a proxy or server that hung up
            # after the head, not an empty file (that has a Content-Length: 0, or a chunked end).
            via = proxy_for(src.url)
            raise TransientHTTPError(f"{host}{f' through the proxy {via}' if via else ''} answered 200 with no body "
                                     "and no length (the connection closed after the head)", kind=Failure.BAD_ANSWER)
        changed = _validator_changed(src, etag, last_modified, hashed=hashed)
        resized = known_size is not None and total is not None and total != known_size
        if (changed or resized) and others:
            # One source of several changed its file: drop it (and what it gave us)
            # instead of starting over with it still in the mix.
            what = f"size {known_size} -> {total}" if resized else f"ETag {src.etag} -> {etag}"
            raise SourceBad(f"{host} changed its file ({what})")
        if start > 0 or resized:
            if changed or resized:
                raise Restart(f"{host}: the remote file changed; restarting from 0")
            raise Restart(f"{host} ignored Range; restarting from 0 on one connection", ranges=False)
        if changed:
            raise Restart(f"{host}: the remote file changed; restarting from 0")
        _check_validator(src, etag, last_modified, others=others, have_bytes=have_bytes, hashed=hashed)
        return Answer(0, total, total, etag, last_modified, whole_body=ranged, note=warning)
    raise TransientHTTPError(f"{host} answered HTTP {status}")


_GZIP_NAMES = (".gz", ".tgz", ".gzip")
_GZIP_TYPES = ("application/gzip", "application/x-gzip", "application/gzip-compressed", "application/x-gunzip")
_GZIP_MAGIC = b"\x1f\x8b"


def _stored_gzip(resp, name: str, encoding: str, start: int) -> bool:
    """Whether a ``gzip``-labelled answer is a stored gzip file sent as it is, not compressed
    for the trip: the body is then the file, and its label a server setting (Apache's
    ``AddEncoding x-gzip .gz .tgz``, an S3 object uploaded with ``ContentEncoding: gzip``).

    Only for a file whose name or Content-Type says gzip; then a server that compresses on
    the fly all the same (although asked for ``identity``) is told apart by the bytes: from
    the file's start, the body must be gzip whose first bytes do not decompress to a gzip
    header again (a gzip of the ``.gz``); from its middle, a 206's Content-Length must be its
    range's length, and without one the body must not open with a gzip header (a gzip of the
    range). (A range whose stated length is its own is the stored bytes even when they open
    with a gzip header: a file of many gzip members, bgzip's or a WARC's, has one at every
    member, and such a range was refused at every try: exit 3.)
    """
    if encoding not in ("gzip", "x-gzip"):
        return False
    content_type = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if not (name.lower().endswith(_GZIP_NAMES) or content_type in _GZIP_TYPES):
        return False
    exact = False  # a 206 whose Content-Length is its range's: the length known before a byte was sent
    if resp.status == 206:
        match = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
        length = resp.headers.get("Content-Length", "")
        if not match or (length.isdigit() and int(length) != int(match.group(2)) - int(match.group(1)) + 1):
            return False
        exact = length.isdigit()
    head = resp.peek(SNIFF_BYTES)
    if start > 0:  # (a gzip header where the range begins is a member's in a multi-member file: BGZF, WARC)
        return exact or head[:3] != _GZIP_MAGIC + b"\x08"
    if head[:2] != _GZIP_MAGIC:
        return False
    import zlib

    try:
        inner = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 2)
    except zlib.error:  # not a gzip stream after all: left to the hash (or to the type check)
        return True
    return inner != _GZIP_MAGIC


def _validator_changed(src: Source, etag: str | None, last_modified: str | None, *, hashed: bool) -> bool:
    """Whether the answer's validators say the file changed. A pool of replicas, each with its own
    validators for the same file (:meth:`Source.replica_change`), is no change: with the hash known,
    the hash judges the bytes from every copy; without, :class:`Restart` for one stream from 0 (the
    file from one copy, never pieces of several)."""
    if not src.differs(etag, last_modified):
        return False
    if not src.replica_change(etag, last_modified):
        return True
    if hashed:
        return False
    raise Restart(f"{host_of(src.url)} answers with validators that change from one request to the next "
                  f"({src.etag or src.last_modified} and {etag or last_modified}: a pool of servers, each copy with "
                  f"its own); one stream from 0, from one copy", ranges=False)


def _check_validator(src: Source, etag: str | None, last_modified: str | None, *, others: bool,
                     have_bytes: bool, hashed: bool = False) -> None:
    if not _validator_changed(src, etag, last_modified, hashed=hashed):
        return
    host = host_of(src.url)
    if others and have_bytes:
        raise SourceBad(f"{host} changed its file (ETag {src.etag} -> {etag})")
    raise Restart(f"{host}: the remote file changed (ETag {src.etag} -> {etag}); restarting from 0")


def one_stream_note(url: str) -> str:
    """What a transfer says when it keeps to one stream from ``url``: no expected hash and no
    validator, so pieces from separate requests could not be told apart by version."""
    from prefetch.net.urls import host_of

    return (f"no expected hash and no ETag or Last-Modified from {host_of(url)}: one stream "
            f"from it, since pieces from separate requests could mix versions of the file")
