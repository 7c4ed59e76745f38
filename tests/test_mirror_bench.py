"""mirror bench: parallel measurements with a deadline against loopback mirrors."""

from __future__ import annotations

import json
import os

import pytest
from conftest import run_cli
from mirror_helpers import (
    BENCH_FILE,
    BENCH_TOML,
    Server,
    SilentServer,
    build_simple_index,
    closed_port_url,
    isolate_tool_env,
    pip_user_conf,
    write_user_mirrors,
)

from prefetch.mirrors.bench import BenchStatus, bench_mirrors, find_probe_link
from prefetch.mirrors.catalog import Mirror

PAYLOAD = b"PK\x03\x04" + os.urandom(384 * 1024)  # a wheel is a zip: its first bytes are checked


@pytest.fixture
def mirrors(tmp_path):
    """A fast and a slow loopback index serving the same probe wheel, and a silent listener."""
    servers = {}
    for name, rate in (("fast", None), ("slow", 48 * 1024)):
        root = tmp_path / name
        build_simple_index(root, {"pip": {BENCH_FILE: PAYLOAD}})
        servers[name] = Server(root, rate=rate).start()
    silent = SilentServer()
    yield servers["fast"], servers["slow"], silent
    for server in servers.values():
        server.stop()
    silent.stop()


def test_bench_picks_the_faster_and_cuts_off_the_silent_one(mirrors):
    fast, slow, silent = mirrors
    report = bench_mirrors(
        [
            Mirror("slow", pypi=f"{slow.url}/simple"),
            Mirror("silent", pypi=f"{silent.url}/simple"),
            Mirror("fast", pypi=f"{fast.url}/simple"),
            Mirror("refused", pypi=f"{closed_port_url()}/simple"),
            Mirror("hf-only", hf="https://hf.example"),  # no PyPI index: not benched
        ],
        deadline=2.0,
        probe_file=BENCH_FILE,
    )
    by_name = {r.name: r for r in report.results}
    assert set(by_name) == {"slow", "silent", "fast", "refused"}
    assert report.fastest is not None and report.fastest.name == "fast"
    assert by_name["fast"].status is BenchStatus.OK and by_name["fast"].bytes == len(PAYLOAD)
    assert by_name["fast"].probe_url.endswith(f"/packages/{BENCH_FILE}")  # found on the /pip/ page
    assert by_name["slow"].status is BenchStatus.PARTIAL and 0 < by_name["slow"].bytes < len(PAYLOAD)
    assert by_name["fast"].throughput_bps > by_name["slow"].throughput_bps
    assert by_name["silent"].status is BenchStatus.TIMEOUT and "deadline" in by_name["silent"].error
    assert by_name["refused"].status is BenchStatus.ERROR and by_name["refused"].bytes == 0
    assert [r.name for r in report.results][:2] == ["fast", "slow"]
    assert "/simple/pip/" in fast.paths and f"/packages/{BENCH_FILE}" in fast.paths


def test_explicit_probe_and_missing_probe(mirrors):
    fast, _, _ = mirrors
    report = bench_mirrors(
        [
            Mirror("direct", pypi=f"{fast.url}/simple", probe=f"{fast.url}/packages/{BENCH_FILE}"),
            Mirror("gone", pypi=f"{fast.url}/simple", probe=f"{fast.url}/packages/nothing.whl"),
        ],
        deadline=3.0,
        probe_file=BENCH_FILE,
    )
    by_name = {r.name: r for r in report.results}
    assert by_name["direct"].status is BenchStatus.OK and by_name["direct"].bytes == len(PAYLOAD)
    assert by_name["gone"].status is BenchStatus.ERROR and "HTTP 404" in by_name["gone"].error


def test_a_captive_portal_is_never_the_fastest_mirror(mirrors):
    """A portal answers the probe at once with its page: that is an error, not a fast mirror."""
    from tests.origin import PORTAL_PAGE, OriginServer

    fast, _, _ = mirrors
    with OriginServer() as portal:
        portal.portal = PORTAL_PAGE
        report = bench_mirrors(
            [
                Mirror("portal", pypi=f"{portal.url}simple", probe=f"{portal.url}packages/{BENCH_FILE}"),
                Mirror("fast", pypi=f"{fast.url}/simple"),
            ],
            deadline=3.0,
            probe_file=BENCH_FILE,
        )
    by_name = {r.name: r for r in report.results}
    assert by_name["portal"].status is BenchStatus.ERROR and "web page" in by_name["portal"].error
    assert report.fastest is not None and report.fastest.name == "fast"


def test_find_probe_link_resolves_relative_links():
    html = '<a href="../../packages/aa/x-1.whl#sha256=1">x</a><a href="../../packages/bb/pip-24.0-py3-none-any.whl#sha256=2">p</a>'
    assert find_probe_link(html, base_url="https://m.example/pypi/simple/pip/", probe_file="pip-24.0-py3-none-any.whl") == (
        "https://m.example/pypi/packages/bb/pip-24.0-py3-none-any.whl"
    )
    assert find_probe_link(html, base_url="https://m.example/s/pip/", probe_file="other.whl").endswith("pip-24.0-py3-none-any.whl")
    assert find_probe_link("<html></html>", base_url="https://m.example/", probe_file="x.whl") is None


def user_catalog(fast, slow, silent) -> str:
    return (
        BENCH_TOML +
        f'[mirrors.fast]\npypi = "{fast.url}/simple"\n'
        f'[mirrors.slow]\npypi = "{slow.url}/simple"\n'
        f'[mirrors.silent]\npypi = "{silent.url}/simple"\n'
    )


def test_cli_bench_json_and_use_fastest(home, monkeypatch, mirrors):
    fast, slow, silent = mirrors
    env = isolate_tool_env(monkeypatch, home)
    write_user_mirrors(home, user_catalog(fast, slow, silent))

    done = run_cli("mirror", "bench", "fast", "slow", "silent", "--deadline", "2", "--json", env=env)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["fastest"] == "fast"
    statuses = {r["name"]: r["status"] for r in data["results"]}
    assert statuses == {"fast": "ok", "slow": "partial", "silent": "timeout"}

    table = run_cli("mirror", "bench", "fast", "silent", "--deadline", "1.5", env=env)
    assert table.returncode == 0
    assert "fastest: fast" in table.stdout and "timeout" in table.stdout and "\x1b[" not in table.stdout

    use = run_cli("mirror", "use", "fastest", "--among", "slow,silent,fast", "--deadline", "2", env=env)
    assert use.returncode == 0, use.stderr
    assert "fastest: fast" in use.stdout
    assert f"index-url = {fast.url}/simple" in pip_user_conf(home).read_text()


def test_use_fastest_when_nothing_answers_exits_3(home, monkeypatch, mirrors):
    _, _, silent = mirrors
    env = isolate_tool_env(monkeypatch, home)
    write_user_mirrors(home, f'[mirrors.silent]\npypi = "{silent.url}/simple"\n'
                             f'[mirrors.refused]\npypi = "{closed_port_url()}/simple"\n')
    done = run_cli("mirror", "use", "fastest", "--among", "silent,refused", "--deadline", "1", env=env)
    assert done.returncode == 3
    assert "no mirror delivered any bytes within 1s" in done.stderr
    assert not pip_user_conf(home).exists()
