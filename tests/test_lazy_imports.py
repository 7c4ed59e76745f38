"""Commands that send no request never import requests (start-up time in a notebook cell).

Each command runs in a real subprocess through the same entry point as ``prefetch``;
at exit the process writes which of the heavy modules it had imported.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from tests.conftest import run_cli
from tests.origin import OriginServer

HEAVY = ("requests", "urllib3", "rich", "tqdm")
DRIVER = """\
import atexit, sys
atexit.register(lambda: sys.stderr.write("\\nIMPORTED=" + ",".join(m for m in {heavy!r} if m in sys.modules) + "\\n"))
sys.argv[0] = "prefetch"
from prefetch.cli import main
main()
"""


def imported(*args: str) -> tuple[set[str], subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-c", DRIVER.format(heavy=HEAVY), *args], capture_output=True,
                          text=True, timeout=120, env=os.environ.copy(), stdin=subprocess.DEVNULL)
    line = [x for x in proc.stderr.splitlines() if x.startswith("IMPORTED=")]
    assert line, proc.stderr
    return {m for m in line[-1].removeprefix("IMPORTED=").split(",") if m}, proc


@pytest.mark.parametrize("args", [["--help"], ["status"], ["list"], ["wait"], ["log"]])
def test_commands_without_requests_never_import_it(home, args):
    modules, _ = imported(*args)
    assert "requests" not in modules and "urllib3" not in modules


def test_a_get_that_finds_everything_cached_never_imports_requests(home, tmp_path):
    data = os.urandom(100_000)
    sha = hashlib.sha256(data).hexdigest()
    out = tmp_path / "d.bin"
    with OriginServer() as origin:
        origin.put("d.bin", data)
        url = origin.url_for("d.bin")
        first = run_cli("get", url, "-o", str(out), "--sha256", sha, "-q")
        assert first.returncode == 0, first.stderr
        modules, proc = imported("get", url, "-o", str(out), "--sha256", sha, "-q")
        assert proc.returncode == 0, proc.stderr
        assert len(origin.data_requests("d.bin")) == 1  # the second get sent nothing
    assert "requests" not in modules and "urllib3" not in modules
    # ... while a get that downloads does import the direct path (the check above can fail; neither
    # requests nor urllib3 is imported: NO_PROXY names the origin's host, see
    # test_a_get_with_no_proxy_naming_the_host...).
    out.unlink()
    with OriginServer() as origin:
        origin.put("d.bin", data)
        modules, proc = imported_of(HEAVY + ("prefetch.net.direct",), "get", origin.url_for("d.bin"), "-o", str(out),
                                    "--sha256", sha, "-q")
    assert proc.returncode == 0, proc.stderr
    assert modules == {"prefetch.net.direct"}, modules


PLANNER_TABLES = ("tomllib", "prefetch.cache.registry", "prefetch.cache.nltk_data", "prefetch.cache.torchvision",
                  "prefetch.hf.names", "prefetch.ms.names", "prefetch.ui.style")


def test_a_get_of_a_url_never_loads_the_other_kinds_tables(home, tmp_path):
    """Each kind's tables (the dataset registry's TOML, NLTK's snapshot, torchvision's) and
    name modules (hf://, ms://) load where a name of that kind is planned, not at the start
    of every ``get``; a quiet ``get`` never loads the terminal styles."""
    data = os.urandom(10_000)
    out = tmp_path / "u.bin"
    with OriginServer() as origin:
        origin.put("u.bin", data)
        proc = subprocess.run([sys.executable, "-c", DRIVER.format(heavy=PLANNER_TABLES), "get",
                               origin.url_for("u.bin"), "-o", str(out), "-q"],
                              capture_output=True, text=True, timeout=120, env=os.environ.copy(),
                              stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    line = [x for x in proc.stderr.splitlines() if x.startswith("IMPORTED=")]
    assert line == ["IMPORTED="], proc.stderr


# What a plain get never needs: the public API's modules (``prefetch/__init__`` loads them on
# first use), the installed Keras's names (cache/keras.py: a dataset under KERAS_HOME asks),
# the resume check of kept bytes, a notebook's HTML table, the idna codec (getaddrinfo is
# given an ASCII host's bytes: net/open_socket.py's idna_free), and email.policy's header
# registry (an answer's headers are read without it: net/answer.py).
GET_NEVER = ("prefetch.api", "prefetch.streaming", "prefetch.adapters", "prefetch.dropins", "prefetch.cache.keras",
             "prefetch.engine.resume_check", "html", "encodings.idna", "stringprep", "unicodedata", "email.policy")


# What a plain get of a small file never needs, though other commands may: json (a lock's
# owner record is quoted with _json's own function, a placement writes the compact record, a
# file done before its first save writes no resume record) and hashlib with OpenSSL's library
# (_hashlib): a lock's key and a record's path hash use the builtin _sha1 and _blake2
# (fs/hashing.py), a file is hashed only when a hash is to be checked.
PLAIN_GET_NEVER = ("json", "hashlib", "_hashlib")


def test_a_plain_http_get_loads_only_what_it_uses(home, tmp_path, monkeypatch):
    # No proxy variable at all (NO_PROXY alone makes the proxy lookup import requests, and
    # requests imports the idna codec itself).
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    data = os.urandom(100_000)
    out = tmp_path / "p.bin"
    with OriginServer() as origin:
        origin.put("p.bin", data)
        modules, proc = imported_of(GET_NEVER + PLAIN_GET_NEVER + ("urllib3", "requests", "prefetch.net.direct", "click"),
                                    "get", origin.url_for("p.bin"), "-o", str(out), "-q")
        assert len(origin.data_requests("p.bin")) == 1
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    # Neither requests nor urllib3 (net/direct.py sends it); the direct path is seen, so the
    # check sees what a download imports. Nor click: a plain get's line is read without it
    # (commands/get_args.py).
    assert modules == {"prefetch.net.direct"}, modules


def test_a_plain_https_get_never_imports_urllib3(home, tls_origin, tmp_path, monkeypatch):
    """The direct path verifies TLS itself (net/tls_context.py: the bundle the environment names,
    here the test CA through REQUESTS_CA_BUNDLE): an https get needs urllib3 no more than http."""
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    data = os.urandom(100_000)
    out = tmp_path / "s.bin"
    tls_origin.put("s.bin", data)
    modules, proc = imported_of(("urllib3", "requests", "prefetch.net.direct", "prefetch.net.tls_context"), "get",
                                tls_origin.url_for("s.bin"), "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    assert len(tls_origin.data_requests("s.bin")) >= 1
    assert modules == {"prefetch.net.direct", "prefetch.net.tls_context"}, modules


def test_status_and_a_worker_never_load_the_html_table_machinery(home, tmp_path):
    data = os.urandom(10_000)
    out = tmp_path / "w.bin"
    with OriginServer() as origin:
        origin.put("w.bin", data)
        started = run_cli("get", origin.url_for("w.bin"), "-o", str(out), "-q", "-b")
        assert started.returncode == 0, started.stderr
        assert run_cli("wait").returncode == 0
    assert out.read_bytes() == data
    modules, proc = imported_of(GET_NEVER, "status")
    assert proc.returncode == 0, proc.stderr
    assert modules == set(), modules


def imported_of(watch: tuple[str, ...], *args: str) -> tuple[set[str], subprocess.CompletedProcess]:
    """``imported`` for the modules in ``watch``."""
    proc = subprocess.run([sys.executable, "-c", DRIVER.format(heavy=watch), *args], capture_output=True,
                          text=True, timeout=120, env=os.environ.copy(), stdin=subprocess.DEVNULL)
    line = [x for x in proc.stderr.splitlines() if x.startswith("IMPORTED=")]
    assert line, proc.stderr
    return {m for m in line[-1].removeprefix("IMPORTED=").split(",") if m}, proc


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost", "Example.COM", "example.com.", "::1", "fe80::1%eth0",
                                  "a" * 63 + ".org", "a" * 64 + ".org", "x." + "b" * 64, "a..b", ".a", "",
                                  "bücher.example", "xn--bcher-kva.example"])
def test_idna_free_hands_getaddrinfo_what_the_idna_codec_would(name):
    """An ASCII name whose labels the codec accepts goes as its bytes (the codec's own
    result); any other name goes as the str, for getaddrinfo's codec to encode or refuse."""
    from prefetch.net.open_socket import idna_free

    try:
        encoded = name.encode("idna")
    except UnicodeError:
        encoded = None
    given = idna_free(name)
    if isinstance(given, bytes):
        assert given == encoded
    else:
        assert given == name and (encoded is None or not name.isascii())


@pytest.mark.parametrize("no_proxy", ["127.0.0.1,localhost", " localhost , 127.0.0.1 ", "127.0.0.0/8"])
def test_a_get_with_no_proxy_naming_the_host_never_imports_requests(home, tmp_path, monkeypatch, no_proxy):
    """NO_PROXY naming the host itself (as test suites and benches set it) settles requests'
    proxy lookup without it: no proxy. Any other form (a CIDR block) still asks requests."""
    monkeypatch.setenv("NO_PROXY", no_proxy)
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # never used: the host is excluded
    data = os.urandom(50_000)
    out = tmp_path / "n.bin"
    with OriginServer() as origin:
        origin.put("n.bin", data)
        modules, proc = imported("get", origin.url_for("n.bin"), "-o", str(out), "-q")
        assert len(origin.data_requests("n.bin")) == 1  # it went straight to the origin
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    assert ("requests" in modules) == ("/" in no_proxy), modules
    assert ("urllib3" in modules) == ("/" in no_proxy), modules  # (requests imports urllib3; the get does not)


def test_importing_prefetch_loads_the_api_modules_only_when_a_name_is_used():
    code = """\
import sys, prefetch
before = sorted(m for m in sys.modules if m.startswith("prefetch."))
from prefetch import *
import prefetch.api, prefetch.streaming, prefetch.dropins, prefetch.adapters
same = all(getattr(prefetch, n) is getattr(sys.modules[prefetch._LAZY[n]], n) for n in prefetch._LAZY)
print(before, sorted(set(prefetch.__all__) - set(globals())), same, prefetch.api.ensure is prefetch.ensure,
      prefetch.adapters.samples.__name__, set(prefetch.__all__) <= set(dir(prefetch)))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["['prefetch.errors',", "'prefetch.model',", "'prefetch.model.lazy']", "[]", "True", "True", "prefetch.adapters.samples", "True"]


def test_a_background_launch_plans_without_loading_the_engine(home, tmp_path):
    """``get -b`` plans the request (its usage errors now) and detaches a worker: the
    launcher, a process at normal priority in the user's cell, loads no transfer machinery (nor
    filelock: the jobs lock is one flock; nor click: commands/get_args.py reads the line; nor the
    renderer, nor the jobs modules that wait and clean: ``prefetch.jobs`` loads its names on use; nor
    hashlib and socket: fs/locks.py hashes a per-file lock's name, which a launcher never takes);
    the worker does the download (and the job completes)."""
    data = os.urandom(50_000)
    out = tmp_path / "b.bin"
    with OriginServer() as origin:
        origin.put("b.bin", data)
        modules, proc = imported_of(("prefetch.engine.transfer", "prefetch.flow.files", "prefetch.flow.file_list",
                                     "prefetch.flow.planning",
                                     "filelock", "click", "prefetch.ui.render", "prefetch.jobs.wait",
                                     "prefetch.jobs.housekeeping", "hashlib", "socket"),
                                    "get", origin.url_for("b.bin"), "-o", str(out), "-b", "-q")
        assert proc.returncode == 0, proc.stderr
        assert modules == {"prefetch.flow.planning"}, modules  # (it did plan)
        waited = run_cli("wait", timeout=120)
    assert waited.returncode == 0, waited.stderr
    assert out.read_bytes() == data


def test_a_get_line_click_must_read_still_gets_clicks_help_and_errors(home):
    """``get --help`` and a line with a usage error go through click: its help, its message."""
    modules, proc = imported_of(("click",), "get", "--help")
    assert proc.returncode == 0 and "--output-dir" in proc.stdout and modules == {"click"}
    modules, proc = imported_of(("click",), "get", "https://example.org/x", "--connections", "many")
    assert proc.returncode == 2 and modules == {"click"}
    assert "Invalid value for '--connections': 'many' is not a valid integer" in proc.stderr


RUN_DRIVER = """\
import atexit, sys
def report():
    for name, attr in (("inspect", "signature"), ("ssl", "SSLContext"), ("calendar", "timegm"), ("datetime", "date"),
                       ("selectors", "DefaultSelector"), ("array", "array")):
        module = sys.modules.get(name)
        sys.stderr.write(f"\\n{name.upper()}=" + ("loaded" if module is not None and attr in vars(module) else "deferred"))
    sys.stderr.write("\\n")
atexit.register(report)
sys.argv[0] = "prefetch"
from prefetch.cli import run
run()
"""


@pytest.mark.parametrize("background", [False, True])
def test_a_get_process_loads_neither_inspect_nor_ssl(home, tmp_path, background):
    """``run`` (the process's entry point) defers ``inspect`` (dataclasses imports it and a get,
    or its -b launcher, never uses it), ``ssl`` (http.client imports it; an http URL never
    uses it), ``calendar`` and ``datetime`` (email.utils' date functions), ``selectors`` and ``array``
    (socket's sendfile and send_fds): cli.defer_import."""
    data = os.urandom(20_000)
    out = tmp_path / "i.bin"
    with OriginServer() as origin:
        origin.put("i.bin", data)
        args = ["get", origin.url_for("i.bin"), "-o", str(out), "-q"] + (["-b"] if background else [])
        proc = subprocess.run([sys.executable, "-c", RUN_DRIVER, *args], capture_output=True, text=True, timeout=120,
                              env=os.environ.copy(), stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr
        assert "INSPECT=deferred" in proc.stderr.splitlines(), proc.stderr
        assert "SSL=deferred" in proc.stderr.splitlines(), proc.stderr  # (an http URL)
        assert {"CALENDAR=deferred", "DATETIME=deferred"} <= set(proc.stderr.splitlines()), proc.stderr
        assert {"SELECTORS=deferred", "ARRAY=deferred"} <= set(proc.stderr.splitlines()), proc.stderr  # (socket's)
        if background:
            assert run_cli("wait", timeout=120).returncode == 0
    assert out.read_bytes() == data


def test_a_deferred_module_loads_on_first_use():
    code = """\
import sys
from prefetch.cli import defer_import
defer_import("inspect")
import dataclasses, inspect
stand_in = inspect
assert "signature" not in vars(inspect)
try:
    defer_import("email.utils")
except ValueError as exc:
    print(exc)
@dataclasses.dataclass
class NoDoc:
    x: int
from inspect import isclass
print(NoDoc.__doc__, isclass(NoDoc), stand_in.signature(NoDoc), sys.modules["inspect"].getdoc is stand_in.getdoc)
try:
    inspect.no_such_name
except AttributeError as exc:
    print(exc)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["defer_import: 'email.utils' is not a top-level module",
                                        "NoDoc(x: int) True (x: int) -> None True",
                                        "module 'inspect' has no attribute 'no_such_name'"]


def test_an_https_get_process_loads_the_deferred_ssl_and_verifies(home, tls_origin, tmp_path):
    """The deferred ``ssl`` is loaded where an https connection first uses it (on a transfer
    thread), and the get verifies the origin's certificate as ever."""
    data = os.urandom(12 << 20)  # (several connections: threads that may load it at once)
    out = tmp_path / "t.bin"
    tls_origin.put("t.bin", data)
    proc = subprocess.run([sys.executable, "-c", RUN_DRIVER, "get", tls_origin.url_for("t.bin"), "-o", str(out), "-q"],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy(), stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "SSL=loaded" in proc.stderr.splitlines(), proc.stderr
    assert out.read_bytes() == data
    env = {k: v for k, v in os.environ.items() if k not in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE")}
    refused = subprocess.run([sys.executable, "-c", RUN_DRIVER, "get", tls_origin.url_for("t.bin"), "-o",
                              str(tmp_path / "u.bin"), "-q"], capture_output=True, text=True, timeout=120, env=env,
                             stdin=subprocess.DEVNULL)
    assert refused.returncode != 0 and not (tmp_path / "u.bin").exists(), refused.stderr
    assert "certificate" in refused.stderr.lower() and "Traceback" not in refused.stderr, refused.stderr


def test_a_list_through_the_bulk_lane_over_http_never_loads_ssl(home, tmp_path):
    """The bulk lane's chunks of an http host catch only ``BlockingIOError`` on their sockets and
    know TLS by the URL's scheme: the deferred ``ssl`` stays unloaded (it was loaded by the first
    chunk, ~7 ms of a 2,000-file list's start). The https lane loads it: tests/test_bulk_tls.py."""
    from tests.nginx import NginxServer
    from tests.test_bulk import LANE_RANGE, _check, _files, _list

    files = _files(tmp_path / "www", 300, 16 << 10)
    out = tmp_path / "out"
    with NginxServer(tmp_path / "www") as server:
        listing = _list(tmp_path / "urls.txt", server, files)
        proc = subprocess.run([sys.executable, "-c", RUN_DRIVER, "get", "-i", str(listing), "-P", str(out), "-q"],
                              capture_output=True, text=True, timeout=120, env=os.environ.copy(),
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, proc.stderr
        served = server.served()
    _check(out, files)
    assert len([r for r in served if r[3] == LANE_RANGE]) >= 200, "most files came through the lane"
    assert "SSL=deferred" in proc.stderr.splitlines(), proc.stderr
