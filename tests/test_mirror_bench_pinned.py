"""`mirror bench` holds the default probe wheel (pip 24.0's) to the sha256 PyPI publishes, not to
the mirror's own index page: a hostile or broken mirror served other bytes under that name with a
page whose ``#sha256=`` fitted them, was measured ``ok`` and could be the fastest, so `mirror use
fastest` pointed pip at it. A user's ``[bench] sha256`` pins their own ``[bench] file`` alike; a
``[bench] file`` without one keeps the page's hash (the other mirror tests). Real loopback
mirrors, the real CLI."""

from __future__ import annotations

import hashlib
import json
import os

from conftest import run_cli
from mirror_helpers import BENCH_FILE, Server, build_simple_index, isolate_tool_env, pip_user_conf, write_user_mirrors

from prefetch.mirrors.bench import BenchStatus, bench_mirrors
from prefetch.mirrors.catalog import DEFAULT_BENCH_FILE, PUBLISHED_SHA256, PUBLISHED_SIZE, Mirror, load_catalog

FAKE = b"PK\x03\x04" + os.urandom(200 * 1024)  # a zip's first bytes, not pip's wheel


def _liar(tmp_path, files: dict[str, bytes]) -> Server:
    """A mirror whose ``/simple/pip/`` page lists ``files``, each with the sha256 of the bytes it serves."""
    root = tmp_path / "liar"
    build_simple_index(root, {"pip": files})
    return Server(root).start()


def test_pips_wheel_that_its_own_page_vouches_for_is_still_checked_against_pypis_hash(tmp_path):
    liar = _liar(tmp_path, {DEFAULT_BENCH_FILE: FAKE})
    try:
        report = bench_mirrors([Mirror("liar", pypi=f"{liar.url}/simple")], deadline=3.0)
    finally:
        liar.stop()
    (only,) = report.results
    assert f"/packages/{DEFAULT_BENCH_FILE}" in liar.paths  # the whole file was asked for
    assert only.status is BenchStatus.ERROR, only
    assert "the sha256 PyPI publishes" in only.error and DEFAULT_BENCH_FILE in only.error, only.error
    assert report.fastest is None


def test_a_page_offering_another_wheel_instead_of_pips_is_not_measured(tmp_path):
    """Without pip 24.0 on the page the bench took the page's last wheel, checked only by the page."""
    liar = _liar(tmp_path, {"evil-1.0-py3-none-any.whl": FAKE})
    try:
        report = bench_mirrors([Mirror("liar", pypi=f"{liar.url}/simple")], deadline=3.0)
    finally:
        liar.stop()
    (only,) = report.results
    assert only.status is BenchStatus.ERROR and f"no {DEFAULT_BENCH_FILE} listed" in only.error, only
    assert not any(path.endswith(".whl") for path in liar.paths)
    assert report.fastest is None


def test_an_explicit_probe_url_of_pips_wheel_is_held_to_the_same_hash(tmp_path):
    """As the catalog's ``pypi`` entry gives it: ``probe = .../pip-24.0-py3-none-any.whl``, no page read."""
    liar = _liar(tmp_path, {DEFAULT_BENCH_FILE: FAKE})
    try:
        report = bench_mirrors([Mirror("liar", pypi=f"{liar.url}/simple",
                                       probe=f"{liar.url}/packages/{DEFAULT_BENCH_FILE}")], deadline=3.0)
    finally:
        liar.stop()
    (only,) = report.results
    assert only.status is BenchStatus.ERROR and "the sha256 PyPI publishes" in only.error, only


def test_use_fastest_never_points_pip_at_a_mirror_lying_about_pips_wheel(home, monkeypatch, tmp_path):
    liar = _liar(tmp_path, {DEFAULT_BENCH_FILE: FAKE})
    env = isolate_tool_env(monkeypatch, home)
    write_user_mirrors(home, f'[mirrors.liar]\npypi = "{liar.url}/simple"\n')
    try:
        bench = run_cli("mirror", "bench", "liar", "--deadline", "3", "--json", env=env)
        use = run_cli("mirror", "use", "fastest", "--among", "liar", "--deadline", "3", env=env)
    finally:
        liar.stop()
    assert bench.returncode == 0, bench.stderr
    (row,) = json.loads(bench.stdout)["results"]
    assert row["status"] == "error" and "the sha256 PyPI publishes" in row["error"], row
    assert use.returncode == 3, (use.stdout, use.stderr)
    assert len(use.stderr.strip().splitlines()) == 1 and "Traceback" not in use.stderr
    assert not pip_user_conf(home).exists()


def test_a_users_bench_sha256_pins_their_file_and_the_honest_mirror_wins(home, monkeypatch, tmp_path):
    """``[bench] file`` + ``sha256``: the fast liar, whose page fits its own bytes, is an error;
    the slow honest mirror is the one pip is pointed at."""
    right = b"PK\x03\x04" + os.urandom(128 * 1024)
    honest_root = tmp_path / "honest"
    build_simple_index(honest_root, {"pip": {BENCH_FILE: right}})
    honest = Server(honest_root, rate=64 * 1024).start()
    liar = _liar(tmp_path, {BENCH_FILE: FAKE})
    env = isolate_tool_env(monkeypatch, home)
    write_user_mirrors(home, f'[bench]\nfile = "{BENCH_FILE}"\nsha256 = "{hashlib.sha256(right).hexdigest()}"\n'
                             f'[mirrors.liar]\npypi = "{liar.url}/simple"\n'
                             f'[mirrors.honest]\npypi = "{honest.url}/simple"\n')
    try:
        use = run_cli("mirror", "use", "fastest", "--among", "liar,honest", "--deadline", "4", env=env)
    finally:
        honest.stop()
        liar.stop()
    assert use.returncode == 0, use.stderr
    assert "fastest: honest" in use.stdout, use.stdout
    assert f"index-url = {honest.url}/simple" in pip_user_conf(home).read_text()


def test_the_catalogs_pins(tmp_path):
    """The built-in catalog's file is pip's wheel, pinned; a user's other [bench] file has no pin
    unless its sha256 is given, and a malformed one is the catalog's usage error."""
    from prefetch.errors import MirrorCatalogError

    assert PUBLISHED_SHA256 == {"pip-24.0-py3-none-any.whl":
                                "ba0d021a166865d2265246961bec0152ff124de910c5cc39f1156ce3fa7c69dc"}
    catalog = load_catalog(config_dir=tmp_path / "none")
    assert (catalog.bench_file, catalog.bench_sha256) == (DEFAULT_BENCH_FILE, None)  # (pinned by its name)
    (tmp_path / "user").mkdir()
    user = tmp_path / "user" / "mirrors.toml"
    user.write_text(f'[bench]\nfile = "{BENCH_FILE}"\n')
    assert load_catalog(config_dir=user.parent).bench_sha256 is None
    user.write_text(f'[bench]\nfile = "{BENCH_FILE}"\nsha256 = "{"AB" * 32}"\n')
    assert load_catalog(config_dir=user.parent).bench_sha256 == "ab" * 32
    user.write_text('[bench]\nsha256 = "abc"\n')
    try:
        load_catalog(config_dir=user.parent)
    except MirrorCatalogError as exc:
        assert "[bench] sha256 must be 64 hex digits" in str(exc) and "mirrors.toml:2" in str(exc), exc
    else:
        raise AssertionError("a malformed [bench] sha256 was accepted")


class _EndlessLiar:
    """A mirror whose ``/simple/pip/`` page lists ``name`` and which serves, under it, zip-looking
    bytes that never end, ``rate`` bytes a second: cut off at the deadline, measured ``partial``,
    its bytes never checked against any hash."""

    def __init__(self, name: str, rate: int) -> None:
        import http.server
        import threading
        import time

        stop = self.stop_serving = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.startswith("/simple/"):
                    page = f'<html><body><a href="/packages/{name}">{name}</a></body></html>'.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                chunk = b"PK\x03\x04" + bytes(rate // 20 - 4)
                try:
                    while not stop.is_set():
                        self.wfile.write(chunk)
                        time.sleep(0.05)
                except OSError:
                    pass
                self.close_connection = True

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.stop_serving.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_mirror_that_never_ends_pips_wheel_is_not_measured_partial_and_fastest(tmp_path):
    """Cut off at the deadline, a mirror's bytes were never checked: one that sent junk past the
    wheel's size, as fast as it liked, was `partial`, usable, and the fastest (`use fastest`
    pointed pip at it). Past the published size it is not the file: an error."""
    liar = _EndlessLiar(DEFAULT_BENCH_FILE, rate=4 << 20)
    try:
        report = bench_mirrors([Mirror("liar", pypi=f"{liar.url}/simple")], deadline=3.0)
    finally:
        liar.close()
    (only,) = report.results
    assert only.status is BenchStatus.ERROR and "the sha256 PyPI publishes" in only.error, only
    assert only.bytes <= PUBLISHED_SIZE[DEFAULT_BENCH_FILE] + (256 << 10), only  # (it stopped reading there)
    assert report.fastest is None


def test_a_pinned_file_cut_off_at_the_deadline_ranks_after_a_mirror_whose_bytes_were_checked(tmp_path):
    """A user's ``[bench] sha256`` (no size known): the liar sending unchecked bytes faster than the
    honest mirror sends the right file is `partial`, and comes after it."""
    right = b"PK\x03\x04" + os.urandom(128 * 1024)
    honest_root = tmp_path / "honest"
    build_simple_index(honest_root, {"pip": {BENCH_FILE: right}})
    honest = Server(honest_root, rate=96 * 1024).start()
    liar = _EndlessLiar(BENCH_FILE, rate=4 << 20)
    try:
        report = bench_mirrors([Mirror("liar", pypi=f"{liar.url}/simple"), Mirror("honest", pypi=f"{honest.url}/simple")],
                               deadline=4.0, probe_file=BENCH_FILE, probe_sha256=hashlib.sha256(right).hexdigest())
    finally:
        honest.stop()
        liar.close()
    by_name = {r.name: r for r in report.results}
    assert by_name["honest"].status is BenchStatus.OK, by_name
    assert by_name["liar"].status is BenchStatus.PARTIAL, by_name
    assert by_name["liar"].throughput_bps > by_name["honest"].throughput_bps, by_name  # (the liar's bytes came faster)
    assert report.fastest.name == "honest", report.results
