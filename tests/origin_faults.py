"""The test origin's one-shot faults (``OriginServer.add_fault``), besides the demo's
``CloseAfter``: each is consumed by the next request that matches its ``path`` /
``method`` / ``only_ranged`` filters (see ``prefetch.demo.origin.Fault``). Faults that
shape a body (``shapes_body``) never match HEAD."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from prefetch.demo.origin import CloseAfter, Fault

__all__ = [
    "ChangeContent", "CloseAfter", "Delay", "Fault", "Gzip", "IgnoreRange", "LongContentLength",
    "PORTAL_PAGE", "Redirect", "StallAfter", "Status", "WebPage", "WrongBytes", "WrongContentRange",
]

PORTAL_PAGE = (b"<!DOCTYPE html>\n<html><head><title>Sign in to the network</title></head>\n"
               b"<body><form action=\"/login\" method=\"post\">Accept the terms to continue"
               b"<input type=\"submit\"></form></body></html>\n")


@dataclass
class StallAfter(Fault):
    """Send headers and ``n`` body bytes, then send nothing for ``seconds`` (socket kept
    open), then close the connection."""

    n: int
    seconds: float
    shapes_body: ClassVar[bool] = True


@dataclass
class Delay(Fault):
    """Wait ``seconds`` before answering at all (slow time-to-first-byte), then answer
    normally."""

    seconds: float


@dataclass
class Status(Fault):
    """Answer with ``code`` and a short text body. ``retry_after`` (seconds or an
    HTTP-date string) becomes ``Retry-After``; ``headers`` are added as given. A 416
    without an explicit Content-Range gets ``bytes */SIZE`` for a known file."""

    code: int
    retry_after: int | str | None = None
    headers: dict[str, str] | None = None


@dataclass
class IgnoreRange(Fault):
    """Answer this one request with 200 and the full body, whatever Range says."""

    shapes_body: ClassVar[bool] = True


@dataclass
class WrongContentRange(Fault):
    """206 whose Content-Range starts ``shift`` bytes after the requested start (or
    before it, when after is impossible), with the bytes that range really holds."""

    shift: int = 1
    shapes_body: ClassVar[bool] = True


@dataclass
class LongContentLength(Fault):
    """Announce a Content-Length ``extra`` bytes longer than the body sent, then close."""

    extra: int
    shapes_body: ClassVar[bool] = True


@dataclass
class Gzip(Fault):
    """Answer with ``Content-Encoding: gzip`` and a gzip of the requested slice (206 with
    the requested Content-Range on a Range request; Content-Length is the gzip size)."""

    shapes_body: ClassVar[bool] = True


@dataclass
class WebPage(Fault):
    """Answer 200 with a web page (``body``) instead of the file, as a captive portal does.
    ``content_type`` is sent as given (None: no Content-Type at all)."""

    body: bytes = PORTAL_PAGE
    content_type: str | None = "text/html; charset=utf-8"


@dataclass
class Redirect(Fault):
    """Answer ``code`` with ``Location: location`` (relative or absolute, sent as is)."""

    location: str
    code: int = 302


@dataclass
class ChangeContent(Fault):
    """Replace the file (new ETag and Last-Modified) before answering this request."""

    data: bytes


@dataclass
class WrongBytes(Fault):
    """Correct status and headers, but one byte in the middle of the body is flipped."""

    shapes_body: ClassVar[bool] = True
