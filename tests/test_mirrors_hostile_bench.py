"""Hostile review of `mirror bench`: a mirror that answers 200 with something that is not the file."""

from __future__ import annotations

import os

import pytest
from conftest import run_cli
from mirror_helpers import (
    BENCH_FILE,
    BENCH_TOML,
    Server,
    build_simple_index,
    closed_port_url,
    isolate_tool_env,
    pip_user_conf,
    write_user_mirrors,
)

from prefetch.mirrors.bench import BenchStatus, bench_mirrors
from prefetch.mirrors.catalog import Mirror

PAYLOAD = os.urandom(256 * 1024)


def _bench_a_liar_beside_an_honest_mirror(tmp_path, spoil):
    """``bench_mirrors`` of two mirrors of the same index, the liar's tree changed by
    ``spoil(root)``; the honest one paced at 64 KiB/s. (the report, the liar's server)"""
    honest_root, liar_root = tmp_path / "honest", tmp_path / "liar"
    build_simple_index(honest_root, {"pip": {BENCH_FILE: PAYLOAD}})
    build_simple_index(liar_root, {"pip": {BENCH_FILE: PAYLOAD}})
    spoil(liar_root)
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
    return report, liar


def test_a_mirror_serving_a_short_non_html_error_body_is_never_the_fastest(tmp_path):
    """Its index lists the real wheel (with its sha256); the file URL answers 200 with a tiny JSON
    error. Before: status ok with a rate (42 bytes in a few ms), a candidate for fastest."""
    def spoil(liar_root):
        (liar_root / "packages" / BENCH_FILE).write_bytes(b'{"code": 403, "message": "access denied"}\n')

    report, liar = _bench_a_liar_beside_an_honest_mirror(tmp_path, spoil)
    by_name = {r.name: r for r in report.results}
    assert f"/packages/{BENCH_FILE}" in liar.paths  # it was asked for the file, and answered 200
    assert by_name["liar"].status is BenchStatus.ERROR and "sha256" in by_name["liar"].error
    assert report.fastest is not None and report.fastest.name == "honest"
    assert by_name["honest"].status in (BenchStatus.OK, BenchStatus.PARTIAL)


def test_use_fastest_never_configures_a_mirror_that_serves_the_wrong_bytes(home, monkeypatch, tmp_path):
    root = tmp_path / "liar"
    build_simple_index(root, {"pip": {BENCH_FILE: PAYLOAD}})
    (root / "packages" / BENCH_FILE).write_bytes(b"blocked\n")
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


@pytest.mark.parametrize(
    "args, needle",
    [
        (["mirror", "bench", "refused", "--deadline", "nan"], "'--deadline'"),  # nan passes a range check
        (["mirror", "bench", "refused", "--deadline", "inf"], "'--deadline'"),  # would never end
        (["mirror", "use", "fastest", "--among", "refused", "--deadline", "NaN"], "'--deadline'"),
        (["doctor", "--no-sources", "--deadline", "nan"], "'--deadline'"),
        # `--among "$LIST"` with an empty LIST benched every mirror of the catalog and switched pip
        (["mirror", "use", "fastest", "--among", "", "--deadline", "0.5"], "'--among'"),
        (["mirror", "use", "fastest", "--among", " , ", "--deadline", "0.5"], "'--among'"),
    ],
)
def test_bad_deadline_or_empty_among_is_one_usage_line(home, monkeypatch, args, needle):
    env = isolate_tool_env(monkeypatch, home)
    write_user_mirrors(home, f'[mirrors.refused]\npypi = "{closed_port_url()}/simple"\n')
    done = run_cli(*args, env=env, timeout=60)
    assert done.returncode == 2 and needle in done.stderr, (done.returncode, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not pip_user_conf(home).exists()


class _Trickle:
    """Answers the probe at once (200, octet-stream, 1 MB announced), then one byte every 0.2 s."""

    def __init__(self) -> None:
        import http.server
        import threading
        import time

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(1 << 20))
                self.end_headers()
                try:
                    for _ in range(150):
                        self.wfile.write(b"x")
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:
                    pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_trickling_mirror_is_partial_with_its_bytes_not_no_answer():
    """The web-page sniff peeked at 512 bytes, which a trickle takes 100 s to send: the worker
    was abandoned at the deadline and the mirror reported as 'no answer' with 0 bytes."""
    server = _Trickle()
    try:
        report = bench_mirrors([Mirror("trickle", pypi=f"{server.url}/simple", probe=f"{server.url}/p.whl")],
                               deadline=1.5)
    finally:
        server.stop()
    (only,) = report.results
    assert only.status is BenchStatus.PARTIAL and only.bytes > 0, only
    assert "cut off" in only.error


def test_a_probe_link_to_a_local_file_is_never_read_nor_the_fastest(tmp_path):
    """A mirror's project page (hostile, or a portal's) links the probe file as ``file://``: the
    bench read the local file (any file: /dev/zero measured as the fastest mirror there is).
    The probe link is held to what a redirect may be: http(s), never from https down to http."""
    local = tmp_path / "local" / BENCH_FILE
    local.parent.mkdir()
    local.write_bytes(PAYLOAD)
    def spoil(liar_root):
        page = liar_root / "simple" / "pip" / "index.html"
        page.write_text(page.read_text().replace(f"../../packages/{BENCH_FILE}", local.as_uri()))

    report, _ = _bench_a_liar_beside_an_honest_mirror(tmp_path, spoil)
    by_name = {r.name: r for r in report.results}
    assert by_name["liar"].status is BenchStatus.ERROR, by_name["liar"]
    assert "only http(s)" in by_name["liar"].error, by_name["liar"].error
    assert report.fastest is not None and report.fastest.name == "honest"
