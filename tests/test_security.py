"""Security: TLS always verified, redirects only to http(s) and never down to http, the server
never decides a local path, and no shell anywhere."""

from __future__ import annotations

import ast
import hashlib
import os
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import prefetch
from prefetch.errors import ExitCode
from tests.helpers import write_registry
from tests.origin import OriginServer, Redirect
from tests.test_bad_input import one_error_line

DATA = random.Random(77).randbytes(150_000)
SHA = hashlib.sha256(DATA).hexdigest()
PACKAGE = Path(prefetch.__file__).resolve().parent


@pytest.fixture
def tls_origin():
    with OriginServer(tls=True) as server:
        server.put("d.bin", DATA)
        yield server


@pytest.fixture
def origin():
    with OriginServer() as server:
        server.put("d.bin", DATA)
        yield server


def env_with(**changes: str | None) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR"):
        env.pop(key, None)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


# --------------------------------------------------------------------------- TLS


def test_untrusted_certificate_is_refused(cli, tls_origin, tmp_path):
    out = tmp_path / "d.bin"
    line = one_error_line(cli("get", tls_origin.url_for("d.bin"), "-o", str(out), "-q", env=env_with()),
                          ExitCode.NETWORK)
    assert "TLS verification failed" in line and "certificate verify failed" in line
    assert not out.exists() and not Path(f"{out}.part").exists()
    assert tls_origin.data_requests("d.bin") == []  # not one request got through the handshake


@pytest.mark.parametrize("knob", [{"CURL_CA_BUNDLE": ""}, {"PYTHONHTTPSVERIFY": "0"}, {"REQUESTS_CA_BUNDLE": ""}])
def test_environment_tricks_do_not_turn_verification_off(cli, tls_origin, tmp_path, knob):
    out = tmp_path / "d.bin"
    line = one_error_line(cli("get", tls_origin.url_for("d.bin"), "-o", str(out), "-q", env=env_with(**knob)),
                          ExitCode.NETWORK)
    assert "TLS verification failed" in line


def test_trusted_ca_bundle_makes_it_work(cli, tls_origin, tmp_path):
    out = tmp_path / "d.bin"
    env = env_with(REQUESTS_CA_BUNDLE=str(tls_origin.ca_path))
    proc = cli("get", tls_origin.url_for("d.bin"), "-o", str(out), "--sha256", SHA, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == DATA


def test_certificate_for_another_host_is_refused(cli, tls_origin, tmp_path):
    """The certificate names 127.0.0.1 and localhost; the same server reached as 127.1 must fail."""
    url = tls_origin.url_for("d.bin").replace("127.0.0.1", "127.1")
    line = one_error_line(cli("get", url, "-o", str(tmp_path / "d.bin"), "-q",
                              env=env_with(REQUESTS_CA_BUNDLE=str(tls_origin.ca_path), NO_PROXY="*")),
                          ExitCode.NETWORK)
    assert "TLS verification failed" in line and "127.1" in line


def test_package_never_disables_verification():
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for needle in ("verify=False", "verify = False", "CERT_NONE", "check_hostname = False",
                       "_create_unverified_context", "disable_warnings"):
            assert needle not in text, f"{path.relative_to(PACKAGE.parent)} contains {needle}"


# --------------------------------------------------------------------------- redirects


def test_https_to_http_redirect_is_refused(cli, tls_origin, origin, tmp_path):
    tls_origin.add_fault(Redirect(origin.url_for("d.bin"), path="d.bin"))
    out = tmp_path / "d.bin"
    env = env_with(REQUESTS_CA_BUNDLE=str(tls_origin.ca_path))
    line = one_error_line(cli("get", tls_origin.url_for("d.bin"), "-o", str(out), "-q", env=env), ExitCode.NETWORK)
    assert "refused redirect" in line and "https must not fall back to http" in line
    assert origin.requests == []  # the plain-http server was never contacted
    assert not out.exists()


def test_http_to_https_redirect_is_followed(cli, tls_origin, origin, tmp_path):
    origin.add_fault(Redirect(tls_origin.url_for("d.bin"), path="d.bin"))
    out = tmp_path / "d.bin"
    env = env_with(REQUESTS_CA_BUNDLE=str(tls_origin.ca_path))
    proc = cli("get", origin.url_for("d.bin"), "-o", str(out), "--sha256", SHA, "-q", env=env)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == DATA
    assert tls_origin.data_requests("d.bin")


@pytest.mark.parametrize("location", [
    "file:///etc/passwd",
    "ftp://127.0.0.1/d.bin",
    "data:application/octet-stream;base64,cHduZWQ=",
    "javascript:alert(1)",
    "gopher://127.0.0.1:70/_x",
])
def test_redirect_to_a_non_http_scheme_is_refused(cli, origin, tmp_path, location):
    origin.add_fault(Redirect(location, path="d.bin"))
    out = tmp_path / "d.bin"
    line = one_error_line(cli("get", origin.url_for("d.bin"), "-o", str(out), "-q"), ExitCode.NETWORK)
    assert "refused redirect" in line and "only http(s) is followed" in line
    assert not out.exists()


def test_redirect_loop_is_exit_3(cli, origin, tmp_path):
    line = one_error_line(cli("get", origin.loop_url + "/d.bin", "-o", str(tmp_path / "d.bin"), "-q"),
                          ExitCode.NETWORK)
    assert "too many redirects" in line


def test_two_hop_redirect_loop_is_exit_3(cli, origin, tmp_path):
    origin.set_redirect("a.bin", origin.url_for("b.bin"))
    origin.set_redirect("b.bin", "/a.bin")
    line = one_error_line(cli("get", origin.url_for("a.bin"), "-o", str(tmp_path / "a.bin"), "-q"), ExitCode.NETWORK)
    assert "too many redirects" in line
    assert len(origin.requests) <= 2 * 12  # bounded, not endless


# --------------------------------------------------------------------------- paths


class _DispositionHandler(BaseHTTPRequestHandler):
    """Answers every GET with the data and a Content-Disposition that tries to escape."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(DATA)))
        self.send_header("Content-Disposition", 'attachment; filename="../../escaped.bin"; '
                                                "filename*=UTF-8''..%2F..%2Fescaped.bin")
        self.end_headers()
        self.wfile.write(DATA)


@pytest.fixture
def disposition_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _DispositionHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_content_disposition_is_ignored(cli, disposition_server, tmp_path):
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    proc = cli("get", disposition_server + "plain.bin", "--sha256", SHA, "-q", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert (work / "plain.bin").read_bytes() == DATA  # named after the URL, where we asked
    assert not list(tmp_path.rglob("escaped.bin"))
    assert sorted(p.name for p in work.iterdir()) == ["plain.bin"]


def test_redirect_target_name_does_not_rename_the_file(cli, origin, tmp_path):
    origin.add_fault(Redirect("/other-name.bin", path="asked.bin"))
    origin.put("other-name.bin", DATA)
    out_dir = tmp_path / "dl"
    out_dir.mkdir()
    proc = cli("get", origin.url_for("asked.bin"), "--sha256", SHA, "-q", cwd=out_dir)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["asked.bin"]
    assert (out_dir / "asked.bin").read_bytes() == DATA


@pytest.mark.parametrize("tail", ["x/..", ".."])
def test_url_ending_in_dot_dot_never_targets_a_directory(cli, origin, tmp_path, tail):
    """A URL whose last segment is '..' names no file: refuse, never report the parent dir as done."""
    work = tmp_path / "w"
    work.mkdir()
    line = one_error_line(cli("get", origin.url + tail, "-q", cwd=work), ExitCode.USAGE)
    assert f"cannot tell a file name from {origin.url + tail!r}" in line
    assert sorted(os.listdir(work)) == []
    assert origin.requests == []


def test_server_cannot_choose_paths_for_registry_files(cli, home, origin, tmp_path):
    """The registry decides the target; a redirect to a '../'-laden URL changes nothing locally."""
    origin.put("real.bin", DATA)
    origin.add_fault(Redirect("/x/../../../real.bin", path="reg.bin"))
    registry = write_registry(tmp_path / "reg.toml", "regset", origin.url_for("reg.bin"), sha256=SHA)
    proc = cli("get", "regset", "--registry", str(registry), "-q")
    assert proc.returncode == 0, proc.stderr
    datasets = home / ".keras" / "datasets"
    assert sorted(os.listdir(datasets)) == ["reg.bin"]
    assert (datasets / "reg.bin").read_bytes() == DATA


# --------------------------------------------------------------------------- no shell


def test_no_shell_true_anywhere_in_the_package():
    """Neither `shell=True` nor os.system/os.popen: no command line is ever parsed by a shell."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "shell=True" in source.replace(" ", ""):
            offenders.append(f"{path.name}: shell=True")
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant) and kw.value.value is False):
                        offenders.append(f"{path.name}:{node.lineno}: shell={ast.unparse(kw.value)}")
                func = node.func
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "os" \
                        and func.attr in ("system", "popen", "execl", "execlp", "spawnl", "spawnlp"):
                    offenders.append(f"{path.name}:{node.lineno}: os.{func.attr}")
    assert offenders == []
    assert len(list(PACKAGE.rglob("*.py"))) > 10  # the scan really looked at the package
