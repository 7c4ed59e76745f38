"""``prefetch doctor``: one verdict per dataset source, for the ways sources fail in the field."""

from __future__ import annotations

import http.server
import json
import socket
import threading

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer

NAME = "data.bin"
DATA = bytes(range(256)) * 4096  # 1 MiB


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PortalHandler(http.server.BaseHTTPRequestHandler):
    """A captive portal: every URL answers 200 with a login page."""

    def do_GET(self):  # noqa: N802
        body = b"<!DOCTYPE html><html><body>Please log in to the Wi-Fi</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def field(home, tmp_path, monkeypatch):
    """A registry file whose origin refuses connections, with copies that fail DNS, answer a
    web page, and trickle at 20 kB/s; a good mirror named in mirrors.toml."""
    portal = http.server.ThreadingHTTPServer(("127.0.0.1", 0), PortalHandler)
    threading.Thread(target=portal.serve_forever, daemon=True).start()
    with OriginServer() as slow, OriginServer() as good:
        slow.put(NAME, DATA)
        slow.rate = 20_000
        good.put(NAME, DATA)
        urls = {
            "refused": f"http://127.0.0.1:{closed_port()}/refused/{NAME}",
            "dns": f"http://blocked.example:80/dns/{NAME}",
            "portal": f"http://127.0.0.1:{portal.server_address[1]}/portal/{NAME}",
            "slow": slow.url_for(NAME),
            "good": good.url,
        }
        registry = tmp_path / "field.toml"
        registry.write_text(
            f'[toy]\n[[toy.files]]\nname = "{NAME}"\nurl = "{urls["refused"]}"\n'
            f'urls = ["{urls["dns"]}", "{urls["portal"]}", "{urls["slow"]}"]\nsize = {len(DATA)}\n'
        )
        config = home / ".prefetch" / "config"
        config.mkdir(parents=True)
        (config / "mirrors.toml").write_text(f'[datasets.good]\nurl = "{urls["good"]}"\n')
        # pip's and uv's index checks stay on loopback too.
        monkeypatch.setenv("PIP_INDEX_URL", good.url + "simple/")
        monkeypatch.setenv("UV_DEFAULT_INDEX", good.url + "simple/")
        monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        for name in ("HF_ENDPOINT", "CONDARC"):
            monkeypatch.delenv(name, raising=False)
        yield str(registry), urls
    portal.shutdown()


def test_doctor_gives_one_verdict_per_source(field, monkeypatch):
    registry, urls = field
    monkeypatch.setenv("PREFETCH_RESOLVE", "blocked.example=fail")

    proc = run_cli("doctor", "toy", "--registry", registry, "--deadline", "2")
    print(proc.stdout)

    lines = {line for line in proc.stdout.splitlines() if " source " in line}
    def verdict(url: str) -> str:
        base = url.rsplit("/", 1)[0] + "/" if not url.endswith("/") else url
        found = [line for line in lines if f" {base} " in line]
        assert len(found) == 1, (base, proc.stdout)
        return found[0]

    assert "blocked at tcp" in verdict(urls["refused"])
    assert "blocked at dns" in verdict(urls["dns"])
    assert "portal" in verdict(urls["portal"]) and "web page" in verdict(urls["portal"])
    assert "throttled" in verdict(urls["slow"])
    assert verdict(urls["good"]).startswith("[ok  ] source") and ": ok;" in verdict(urls["good"])
    assert "1 of 5 dataset sources work" not in proc.stdout  # throttled still counts as working
    assert "2 of 5 dataset sources work" in proc.stdout
    # Every source that is not ok says what to do.
    out = proc.stdout.splitlines()
    for i, line in enumerate(out):
        if line.startswith("[warn] source"):
            assert out[i + 1].strip().startswith("->"), line
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_doctor_json(field, monkeypatch):
    registry, urls = field
    monkeypatch.setenv("PREFETCH_RESOLVE", "blocked.example=fail")
    monkeypatch.setenv("PREFETCH_DATASET_MIRROR", urls["refused"].rsplit("/", 1)[0] + "/")

    proc = run_cli("doctor", "toy", "--registry", registry, "--deadline", "2", "--json")

    data = json.loads(proc.stdout)
    by_source = {s["source"]: s for s in data["sources"]}
    refused = by_source[urls["refused"].rsplit("/", 1)[0] + "/"]
    assert (refused["verdict"], refused["step"], refused["kind"]) == ("blocked", "tcp", "mirror")
    assert by_source[urls["good"]]["verdict"] == "ok" and by_source[urls["good"]]["rate"] > 0
    # The default mirror replaces the origins (as get would): they are not checked.
    assert urls["dns"].rsplit("/", 1)[0] + "/" not in by_source
    assert proc.returncode == 0 and data["ok"] is True  # the configured good mirror works


def test_doctor_fails_when_no_source_works(field, monkeypatch, home):
    registry, urls = field
    monkeypatch.setenv("PREFETCH_RESOLVE", "blocked.example=fail")
    (home / ".prefetch" / "config" / "mirrors.toml").write_text("")
    (field_registry := home / "only-bad.toml").write_text(
        f'[toy]\n[[toy.files]]\nname = "{NAME}"\nurl = "{urls["refused"]}"\n'
        f'urls = ["{urls["dns"]}", "{urls["portal"]}"]\n'
    )

    proc = run_cli("doctor", "toy", "--registry", str(field_registry), "--deadline", "2")

    assert proc.returncode == 1, proc.stdout
    assert "[fail] sources  none of the 3 dataset sources works from here" in proc.stdout
    assert "0 problem(s)" not in proc.stdout
