"""The one place that creates HTTP sessions and turns requests' errors into ours.

requests is imported lazily: importing this module costs nothing until a
session is made.
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from prefetch.errors import HTTPStatusError, NetworkError

USER_AGENT = "prefetch/0.1 (+resumable dataset downloader)"
MAX_REDIRECTS = 10
# Statuses worth retrying; everything else >= 400 is final (404 stays 404).
TRANSIENT_STATUSES = {408, 425, 429, 500, 502, 503, 504, 507, 509, 520, 521, 522, 523, 524}


@dataclass(frozen=True)
class Timeouts:
    """Connect and read timeouts in seconds (requests has no default)."""

    connect: float = 15.0
    read: float = 30.0


class TransientHTTPError(Exception):
    """A failure worth retrying (connection reset, timeout, 5xx, 429)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def make_session(*, pool_size: int = 16):
    """Return a requests Session with TLS verification on and pools sized for segments."""
    import requests
    from requests.adapters import HTTPAdapter

    session = requests.Session()
    session.headers["User-Agent"] = USER_AGENT
    # Ask for the file's own bytes: a compressed body would not match byte offsets.
    session.headers["Accept-Encoding"] = "identity"
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=pool_size, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def open_url(session, url: str, *, headers: dict[str, str], timeouts: Timeouts, method: str = "GET"):
    """Send a request, following redirects ourselves (never https -> http).

    Returns:
        (response, final_url). The response is streaming; the caller closes it.
    Raises:
        TransientHTTPError: worth retrying.
        HTTPStatusError / NetworkError: final.
    """
    import requests

    current = url
    for _ in range(MAX_REDIRECTS + 1):
        try:
            resp = session.request(
                method,
                current,
                headers=headers,
                stream=True,
                allow_redirects=False,
                timeout=(timeouts.connect, timeouts.read),
            )
        except requests.exceptions.SSLError as exc:
            raise NetworkError(f"TLS verification failed for {current}: {_short(exc)}") from None
        except requests.exceptions.InvalidURL as exc:
            raise NetworkError(f"invalid URL {current}: {_short(exc)}") from None
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            raise TransientHTTPError(f"{_host(current)}: {_short(exc)}") from None
        except requests.exceptions.RequestException as exc:
            raise TransientHTTPError(f"{_host(current)}: {_short(exc)}") from None
        if resp.status_code in (301, 302, 303, 307, 308):
            location = resp.headers.get("Location")
            resp.close()
            if not location:
                raise NetworkError(f"{current} answered {resp.status_code} without a Location")
            target = urljoin(current, location)
            check_redirect(current, target)
            current = target
            continue
        if resp.status_code >= 400 and resp.status_code != 416:
            status = resp.status_code
            retry_after = parse_retry_after(resp.headers.get("Retry-After"))
            resp.close()
            if status in TRANSIENT_STATUSES:
                raise TransientHTTPError(f"{_host(current)} answered HTTP {status}", retry_after=retry_after)
            raise HTTPStatusError(f"{current} answered HTTP {status}; check the URL or the mirror")
        return resp, current
    raise NetworkError(f"too many redirects (more than {MAX_REDIRECTS}) starting at {url}")


def check_redirect(source: str, target: str) -> None:
    """Refuse redirects to other schemes and from https down to http."""
    src, dst = urlsplit(source).scheme, urlsplit(target).scheme
    if dst not in ("http", "https"):
        raise NetworkError(f"refused redirect from {source} to {target}: only http(s) is followed")
    if src == "https" and dst == "http":
        raise NetworkError(f"refused redirect from {source} to {target}: https must not fall back to http")


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP-date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _host(url: str) -> str:
    return urlsplit(url).netloc or url


def _short(exc: BaseException) -> str:
    text = str(exc)
    # urllib3 wraps the useful part deep inside; keep the last clause.
    for marker in ("Caused by ", "Failed to establish a new connection: "):
        if marker in text:
            text = text.split(marker)[-1]
    text = text.strip("()' \"")
    return (text[:200] + "...") if len(text) > 200 else text
