"""`mirror bench` / `use fastest` against a mirror whose index gives no sha256 for the probe wheel
and whose file URL answers 200 with something that is not a wheel (a proxy's error body, a
catch-all that answers every path). Real loopback servers, the real CLI."""

from __future__ import annotations

import os
import re

from conftest import run_cli
from mirror_helpers import (
    BENCH_FILE,
    BENCH_TOML,
    Server,
    build_simple_index,
    isolate_tool_env,
    pip_user_conf,
    write_user_mirrors,
)

from prefetch.mirrors.bench import BenchStatus, bench_mirrors
from prefetch.mirrors.catalog import Mirror

WHEEL = b"PK\x03\x04" + os.urandom(256 * 1024)  # starts as every wheel (a zip) does


def _no_hashes(root):
    """The index's links without their #sha256= (some proxies and older indexes list none)."""
    page = root / "simple" / "pip" / "index.html"
    page.write_text(re.sub(r"#sha256=[0-9a-f]{64}", "", page.read_text()))


def test_a_hashless_index_serving_a_non_wheel_is_never_the_fastest(tmp_path):
    honest_root, liar_root = tmp_path / "honest", tmp_path / "liar"
    build_simple_index(honest_root, {"pip": {BENCH_FILE: WHEEL}})
    build_simple_index(liar_root, {"pip": {BENCH_FILE: WHEEL}})
    _no_hashes(honest_root)
    _no_hashes(liar_root)
    (liar_root / "packages" / BENCH_FILE).write_bytes(b'{"code": 429, "message": "slow down"}\n' * 3)
    honest = Server(honest_root, rate=64 * 1024).start()
    liar = Server(liar_root).start()
    try:
        report = bench_mirrors(
            [Mirror("liar", pypi=f"{liar.url}/simple"), Mirror("honest", pypi=f"{honest.url}/simple")],
            deadline=1.5,
            probe_file=BENCH_FILE,
        )
    finally:
        honest.stop()
        liar.stop()
    by_name = {r.name: r for r in report.results}
    assert f"/packages/{BENCH_FILE}" in liar.paths
    assert by_name["liar"].status is BenchStatus.ERROR and "not a wheel" in by_name["liar"].error
    assert report.fastest is not None and report.fastest.name == "honest"


def test_use_fastest_with_only_such_a_mirror_writes_nothing(home, monkeypatch, tmp_path):
    root = tmp_path / "liar"
    build_simple_index(root, {"pip": {BENCH_FILE: WHEEL}})
    _no_hashes(root)
    (root / "packages" / BENCH_FILE).write_bytes(b"Too Many Requests\n")
    liar = Server(root).start()
    env = isolate_tool_env(monkeypatch, home)
    write_user_mirrors(home, BENCH_TOML + f'[mirrors.liar]\npypi = "{liar.url}/simple"\n')
    try:
        done = run_cli("mirror", "use", "fastest", "--among", "liar", "--deadline", "2", env=env)
    finally:
        liar.stop()
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not pip_user_conf(home).exists()


class _HangsAfterHeaders:
    """Answers the project page's headers at once (200, text/html, 5000 bytes announced), sends a
    few bytes, then nothing: the body never completes."""

    def __init__(self) -> None:
        import http.server
        import threading

        stop = self.stop_event = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", "5000")
                self.end_headers()
                self.wfile.write(b"<html><body>")
                self.wfile.flush()
                stop.wait(60)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.stop_event.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def test_an_index_page_that_hangs_after_its_headers_is_a_timeout_with_its_latency():
    """Before: status 'error', 'TimeoutError: timed out', no latency (the read's timeout escaped)."""
    server = _HangsAfterHeaders()
    try:
        report = bench_mirrors([Mirror("hang", pypi=f"{server.url}/simple")], deadline=1.5)
    finally:
        server.stop()
    (only,) = report.results
    assert only.status is BenchStatus.TIMEOUT, only
    assert only.latency_s is not None and "cut off at the 1.5s deadline" in only.error
    assert report.fastest is None
