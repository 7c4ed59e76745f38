"""A JSON GET of a hub's API, with a few attempts on connection trouble, 5xx, 408 and 429.

Hub APIs (Hugging Face, ModelScope) differ in their URLs, their error statuses and what
they say about them; the retry loop, the redirects and "this is not JSON" are the same.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Callable, Mapping
from urllib.parse import urlsplit

from prefetch.errors import NetworkError, PrefetchError
from prefetch.net.failures import TransientHTTPError
from prefetch.net.http import Client, follow_redirects
from prefetch.net.unreachable import verdict as unreachable_verdict
from prefetch.net.unresolved import verdict as unresolved_verdict
from prefetch.net.urls import redact_url

ATTEMPTS = 4
# The largest API answer read: a Hub tree page of 1000 entries or a ModelScope listing of 3000 is
# well under 2 MiB; a hostile or broken endpoint streaming an endless body must not fill memory.
MAX_BODY = 64 << 20

# refuse(status, final URL, response headers): the error for a final status (401, 404...), or None.
Refusal = Callable[[int, str, Mapping[str, str]], "PrefetchError | None"]


def get_json(client: Client, url: str, *, label: str, api: str, refuse: Refusal,
             backoff: tuple[float, float] = (0.5, 8.0), attempts: int = ATTEMPTS,
             max_body: int = MAX_BODY) -> tuple[object, str | None]:
    """(parsed JSON, ``Link`` header) of ``GET url``.

    ``label`` names what is being fetched and ``api`` the service, in messages; an answer of
    more than ``max_body`` bytes (inflated) is refused unread past that.

    Raises:
        whatever ``refuse`` returns for a status; NetworkError: any other non-200 answer,
        a body that is not JSON, or still failing after ``attempts``.
    """
    last = ""
    unresolved: list = []
    unreached: list = []
    looked_up = False  # the last attempt's name did not resolve (nothing reached): 0.5 s, then 1 s, as get's
    for attempt in range(attempts):
        if attempt:
            time.sleep(min(backoff[1], backoff[0] * 2 ** (attempt - looked_up)))
        looked_up = False
        try:
            resp, final = follow_redirects(client, url, headers={"Accept": "application/json"})
        except TransientHTTPError as exc:
            last = str(exc)
            line = None
            if exc.unresolved is not None:
                from prefetch.net.open_socket import connected_once

                looked_up = not connected_once()  # (nothing reached: a machine without internet, said at once)
                unresolved.append(exc.unresolved)
                line = unresolved_verdict(unresolved, len(unresolved), proxy=exc.proxy)
            elif exc.unreached is not None:
                from prefetch.net.open_socket import reached

                looked_up = not reached(*exc.unreached[:2])  # (a route that is off: said in seconds, as get's)
                unreached.append(exc.unreached)
                line = unreachable_verdict(unreached, len(unreached), proxy=exc.proxy)
            if line is not None:
                raise NetworkError(f"{label}: the {api} API: {line}") from None
            continue
        try:
            status = resp.status
            refused = refuse(status, final, resp.headers) if status != 200 else None
            if refused is not None:
                raise refused
            if status >= 500 or status in (408, 429):
                last = f"{urlsplit(final).netloc} answered HTTP {status}"
                continue
            if status != 200:
                raise NetworkError(f"{label}: {redact_url(final)} answered HTTP {status}")
            body = _read_at_most(resp, max_body + 1)
            encoding = (resp.headers.get("Content-Encoding") or "").strip().lower()
            if encoding in ("gzip", "x-gzip", "deflate") and len(body) <= max_body:
                body = _inflate(body, encoding, f"{label}: {redact_url(final)}", max_body)
            if len(body) > max_body:
                raise NetworkError(f"{label}: {redact_url(final)} answered more than {max_body >> 20} MiB, "
                                   f"which no {api} API answer is (not a {api} endpoint?)")
            link = resp.headers.get("Link")
        except (TransientHTTPError, OSError, http.client.HTTPException) as exc:
            last = str(exc) or type(exc).__name__
            continue
        finally:
            resp.close()
        try:
            return json.loads(body), link
        except (ValueError, RecursionError):  # (RecursionError: brackets nested past the parser's depth)
            raise NetworkError(f"{label}: {redact_url(final)} did not answer JSON (a captive portal, or not a {api} endpoint?)") \
                from None
    raise NetworkError(f"{label}: the {api} API gave up after {attempts} attempts: {last}")


def _read_at_most(resp, limit: int) -> bytes:
    """The body, or its first ``limit`` bytes when it is longer (the rest is never read)."""
    parts, got = [], 0
    while got < limit:
        chunk = resp.read(min(1 << 20, limit - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _inflate(body: bytes, encoding: str, what: str, max_body: int = MAX_BODY) -> bytes:
    """A compressed answer (a proxy or CDN that compresses although we asked for ``identity``, as
    requests would read it), expanded to at most ``max_body + 1`` bytes (a small bomb stays small).

    Raises:
        NetworkError: not the format the header names.
    """
    import zlib

    # gzip: its header; deflate: zlib's (as HTTP means it), else raw deflate as some servers send
    for wbits in ((31,) if encoding != "deflate" else (15, -15)):
        try:
            return zlib.decompressobj(wbits).decompress(body, max_body + 1)
        except zlib.error:
            continue
    raise NetworkError(f"{what} answered a body that is not the {encoding} it says it is")
