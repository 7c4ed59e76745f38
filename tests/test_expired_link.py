"""A signed link that expires mid-download: prefetch asks the original URL for a new one.

GitHub release assets redirect to a signed URL valid for minutes (``objects.githubusercontent.com``),
S3 and OSS presigned URLs and the hubs' CDNs do the same. prefetch asks for a file in many ranged
requests, so one sent after the link's expiry is refused (403, an XML ``AccessDenied``). Before,
that failed the download near its end (exit 3, "answered HTTP 403; check the URL or the mirror");
now a refusal of the redirected URL sends prefetch back to the source's own URL for a fresh
link, and the file completes. A fresh link refused at once is a real refusal: one line, exit 3,
no loop.

The server here is a real HTTP/1.1 server on 127.0.0.1 that redirects ``/orig`` to
``/signed?exp=T`` and refuses the signed URL after T, as S3 does.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from http.server import BaseHTTPRequestHandler

import pytest

from tests.conftest import run_cli
from tests.paced_server import PacedServer, send_paced
from tests.test_faults import fault_env

DATA = os.urandom(3 << 20)


class _SigningOrigin:
    """``/orig`` -> 302 to ``/signed?exp=NOW+valid``; the signed URL serves ranges until then,
    403 after; ``rate``: bytes/s per connection."""

    def __init__(self, *, valid: float, rate: int) -> None:
        self.valid, self.rate = valid, rate
        self.log: list[tuple[str, int]] = []  # (path, status)
        origin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _head(self, status: int, headers: dict[str, str]) -> None:
                origin.log.append((self.path, status))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()

            def do_GET(self) -> None:
                if self.path == "/orig":
                    self._head(302, {"Location": f"/signed?exp={time.time() + origin.valid:.3f}",
                                     "Content-Length": "0"})
                    return
                match = re.fullmatch(r"/signed\?exp=([\d.]+)", self.path)
                if not match:
                    self._head(404, {"Content-Length": "0"})
                    return
                if time.time() > float(match.group(1)):
                    body = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code>"
                            b"<Message>Request has expired</Message></Error>")
                    self._head(403, {"Content-Type": "application/xml", "Content-Length": str(len(body))})
                    self.wfile.write(body)
                    return
                origin.log.append((self.path, send_paced(self, DATA, origin.rate, {
                    "ETag": '"v1"', "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"})))

        self.paced = PacedServer(Handler)
        self.url = f"{self.paced.base}/orig"

    def __enter__(self) -> _SigningOrigin:
        self.paced.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.paced.__exit__(*exc)

    def count(self, status: int) -> int:
        return sum(1 for _path, code in self.log if code == status)


@pytest.mark.parametrize("hashed", [False, True])
def test_a_signed_link_that_expires_mid_download_is_asked_for_again(home, tmp_path, hashed):
    out = tmp_path / "weights.bin"
    extra = ["--sha256", hashlib.sha256(DATA).hexdigest()] if hashed else []
    # ~3 s for the file on 2 connections at 512 KiB/s each; each link is good for 0.6 s
    with _SigningOrigin(valid=0.6, rate=512 << 10) as origin:
        done = run_cli("get", origin.url, "-o", str(out), "--connections", "2", *extra,
                       env=fault_env(PREFETCH_MIN_SPLIT="65536"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == DATA
    assert origin.count(403) >= 1  # (the link did expire under it)
    assert origin.count(302) >= 2  # and a new one was asked for
    assert "expired" in done.stderr or "new link" in done.stderr  # the note says why


def test_a_fresh_link_refused_at_once_fails_with_one_line_and_no_loop(home, tmp_path):
    out = tmp_path / "weights.bin"
    with _SigningOrigin(valid=-1, rate=1 << 20) as origin:
        done = run_cli("get", origin.url, "-o", str(out), env=fault_env(), timeout=120)
    assert done.returncode == 3, (done.returncode, done.stderr)
    lines = [x for x in done.stderr.splitlines() if x.startswith("prefetch: error:")]
    assert len(lines) == 1 and "403" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert origin.count(302) <= 3, origin.log  # asked again at most a bounded number of times
    assert not out.exists()
