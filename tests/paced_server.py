"""A small HTTP/1.1 server on 127.0.0.1 for answers nginx cannot give (links that expire, replicas
with their own validators): :class:`PacedServer` runs a handler class, :func:`send_paced` answers a
GET from bytes, honouring its ``Range`` when asked to, the body paced at a rate."""

from __future__ import annotations

import re
import threading
import time
from http.server import ThreadingHTTPServer


def send_paced(handler, data: bytes, rate: int, headers: dict[str, str], *, ranged: bool = True) -> int:
    """Answer ``handler``'s request with ``data``: 206 for its ``Range`` (when ``ranged``), else
    200; ``headers`` added; the body sent in 32 KiB pieces at ``rate`` bytes/s. Returns the status."""
    start, end = 0, len(data) - 1
    asked = re.fullmatch(r"bytes=(\d+)-(\d*)", handler.headers.get("Range", "")) if ranged else None
    headers = dict(headers)
    if asked:
        start = int(asked.group(1))
        end = min(int(asked.group(2)), end) if asked.group(2) else end
        headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
    headers["Content-Length"] = str(end - start + 1)
    status = 206 if asked else 200
    handler.send_response(status)
    for k, v in headers.items():
        handler.send_header(k, v)
    handler.end_headers()
    pos = start
    try:
        while pos <= end:
            n = min(32 << 10, end - pos + 1)
            handler.wfile.write(data[pos:pos + n])
            pos += n
            time.sleep(n / rate)
    except OSError:  # (the client hung up: a split, a stop)
        pass
    return status


class PacedServer:
    """``handler_class`` served on 127.0.0.1 (a thread per connection); a context manager.
    ``base``: ``http://127.0.0.1:PORT``."""

    def __init__(self, handler_class) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
