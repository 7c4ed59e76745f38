"""A link that can be used only N times, as a portal's single-use token link or a presigned GET
with a short life used up: :class:`LimitedLink` serves ``/dl/<name>?token=T`` (any token) at
most ``uses`` times in all, then answers 403 (an XML ``AccessDenied``, as S3 does). Every
request is logged with its method, ``Range`` and status, so a test can count what a download
spent on the link. Ranges are honoured (206), with ``ETag``, ``Last-Modified`` and
``Content-Disposition`` on each answer. Requests are logged in the order they arrive."""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from tests.paced_server import PacedServer, send_paced

_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
           b"<Message>Request has expired</Message></Error>")


class LimitedLink:
    """``files``: name -> bytes, served under ``/dl/NAME`` with ``Content-Disposition:
    attachment; filename="served-NAME"``; each link (path, whatever its query) answers at most
    ``uses`` requests (0: any number), then 403. ``rate``: bytes/s per connection."""

    def __init__(self, files: dict[str, bytes], *, uses: int = 1, rate: int = 1 << 30) -> None:
        self.files, self.uses, self.rate = files, uses, rate
        self.log: list[tuple[str, str, str, int]] = []  # (method, path, Range, status)
        self.lock = threading.Lock()
        self.spent: dict[str, int] = {}
        link = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _answer(self, head_only: bool) -> None:
                path = urlsplit(self.path).path
                name = path[len("/dl/"):] if path.startswith("/dl/") else None
                with link.lock:
                    used = link.spent.get(path, 0)
                    link.spent[path] = used + 1
                    allowed = name in link.files and (link.uses == 0 or used < link.uses)
                if name not in link.files:
                    status = 404
                elif not allowed:
                    status = 403
                else:
                    status = None
                if status is not None:
                    body = _DENIED if status == 403 else b"not found"
                    link._note(self, status)
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if not head_only:
                        self.wfile.write(body)
                    return
                data = link.files[name]
                headers = {"ETag": f'"{name}-{len(data)}"', "Last-Modified": "Mon, 02 Nov 2026 10:00:00 GMT",
                           "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream",
                           "Content-Disposition": f'attachment; filename="served-{name}"'}
                if head_only:
                    link._note(self, 200)
                    self.send_response(200)
                    for k, v in {**headers, "Content-Length": str(len(data))}.items():
                        self.send_header(k, v)
                    self.end_headers()
                    return
                ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
                link._note(self, 206 if ranged else 200)  # (as it arrives: answers end out of order)
                send_paced(self, data, link.rate, headers)

            def do_GET(self) -> None:
                self._answer(False)

            def do_HEAD(self) -> None:
                self._answer(True)

        self.paced = PacedServer(Handler)

    def _note(self, handler, status: int) -> None:
        with self.lock:
            self.log.append((handler.command, handler.path, handler.headers.get("Range", ""), status))

    def url(self, name: str, token: str = "t0ken") -> str:
        return f"{self.paced.base}/dl/{name}?token={token}"

    def requests(self, name: str) -> list[tuple[str, str, int]]:
        """(method, Range, status) of each request to ``name``'s link, in order."""
        with self.lock:
            return [(m, r, s) for m, p, r, s in self.log if urlsplit(p).path == f"/dl/{name}"]

    def __enter__(self) -> LimitedLink:
        self.paced.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.paced.__exit__(*exc)
