"""A server's bytes that are not UTF-8 (a broken status line, a proxy's error header or page title)
show in retry notes and the error line as ``\\xff``: one line, the same every run, never a
Latin-1 guess (``ÿ``), ``\\udcff`` or a raw ``\\r``. Real CLI against raw servers on 127.0.0.1."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli
from tests.test_direct_failures import _Scripted
from tests.test_proxies import env_with


class _RawServer(_Scripted):
    """Answers every request with the same raw bytes, then closes; each connection on a thread of
    its own (test_direct_failures' scripted server: a connection the client opens ahead and never
    uses holds up no other)."""

    def __init__(self, response: bytes) -> None:
        super().__init__(lambda conn: conn.sendall(response))
        self.url = f"http://127.0.0.1:{self.port}/f.bin"


def _notes_and_error(proc) -> tuple[list[str], str]:
    lines = proc.stderr.splitlines()
    notes = [line for line in lines if " note " in line]
    errors = [line for line in lines if line.startswith("prefetch: error:")]
    assert len(errors) == 1, proc.stderr
    # every line is a note, the error or a timestamped event: nothing broken onto a line of its own
    assert all(line[:4].isdigit() or line.startswith("prefetch: error:") for line in lines), proc.stderr
    return notes, errors[0]


@pytest.mark.parametrize("status_line", [b"XTTP\xff\xfe\r\n\r\n", b"HTTP/1.1 5\xff\xfe3 Bad\r\n\r\n"])
def test_a_broken_status_line_is_shown_escaped_on_one_line(home, tmp_path, status_line):
    server = _RawServer(status_line)
    try:
        proc = run_cli("get", server.url, "-o", str(tmp_path / "f.bin"), env=env_with(PREFETCH_RETRIES="1"))
    finally:
        server.close()
    notes, error = _notes_and_error(proc)
    retry = [n for n in notes if "retry 1/1" in n]
    assert retry and "\\xff\\xfe" in retry[0], proc.stderr
    assert "\\xff\\xfe" in error, error
    for shown in (*notes, error):
        assert "ÿ" not in shown and "\\udc" not in shown and "\r" not in shown, shown


@pytest.mark.parametrize("page", [
    b"HTTP/1.1 503 Unavailable\r\nContent-Length: 0\r\nX-Squid-Error: ERR_\xff\xfe 0\r\n\r\n",
    b"HTTP/1.1 503 Unavailable\r\nServer: squid\r\nContent-Type: text/html\r\nContent-Length: 38\r\n\r\n"
    b"<html><title>No \xff\xfe way</title></html>",
])
def test_a_proxy_page_with_bytes_not_utf8_is_shown_escaped(home, tmp_path, page):
    proxy = _RawServer(page)
    try:
        env = env_with(PREFETCH_RETRIES="1", http_proxy=proxy.url.rsplit("/", 1)[0])
        env.pop("NO_PROXY", None), env.pop("no_proxy", None)
        proc = run_cli("get", "http://example.invalid/f.bin", "-o", str(tmp_path / "f.bin"), env=env)
    finally:
        proxy.close()
    notes, error = _notes_and_error(proc)
    retry = [n for n in notes if "retry 1/1" in n]
    assert retry and "own error page" in retry[0] and "\\xff\\xfe" in retry[0], proc.stderr
    assert "\\xff\\xfe" in error, error
    for shown in (*notes, error):
        assert "ÿ" not in shown and "\\udc" not in shown and "\\ufffd" not in shown and "\ufffd" not in shown, shown
