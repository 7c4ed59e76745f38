"""Shared fixtures: isolated homes, local origin servers, running the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _interrupts_as_a_terminal_has_them() -> None:
    """A run started with SIGINT ignored gets Python's own handler back, as a terminal's run has it.

    A shell without job control (a CI step's script, ``pytest ... &`` in one) starts a background
    command with SIGINT ignored, and Python then leaves it ignored; so do the commands the tests
    start (an ignored signal stays ignored through ``exec``), and prefetch rightly keeps an
    ignored SIGINT ignored. Every test that interrupts its own process or a command it started
    (tests/test_stream_hostile.py, tests/test_review13_watch_interrupt.py, ...) then failed on
    every such run, and passed when run again by hand. With Python's handler installed here, the
    commands start with SIGINT at its default again (a handled signal is reset by ``exec``)."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_interrupts_as_a_terminal_has_them()


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh HOME, KERAS_HOME and PREFETCH_HOME for this test (in-process and subprocesses)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("KERAS_HOME", str(home / ".keras"))
    monkeypatch.setenv("PREFETCH_HOME", str(home / ".prefetch"))
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy",
                "PREFETCH_DATASET_MIRROR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost,::1")
    # Suggested commands read `prefetch ...` whether or not this machine has the script on PATH
    # (tests run `python -m prefetch`); tests/test_hosted14_module_only.py unsets it.
    monkeypatch.setenv("PREFETCH_COMMAND", "prefetch")
    # Fast failure handling in tests; the defaults are for real networks.
    monkeypatch.setenv("PREFETCH_BACKOFF", "0.05")
    monkeypatch.setenv("PREFETCH_BACKOFF_CAP", "0.2")
    monkeypatch.setenv("PREFETCH_RETRY_AFTER_CAP", "1")
    monkeypatch.setenv("PREFETCH_READ_TIMEOUT", "3")
    monkeypatch.setenv("PREFETCH_CONNECT_TIMEOUT", "3")
    return home


@pytest.fixture
def keras_datasets(home) -> Path:
    """Where this test's Keras looks for datasets."""
    return home / ".keras" / "datasets"


def run_cli(*args: str, env: dict | None = None, timeout: float = 120, cwd: str | Path | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m prefetch ARGS`` as a real subprocess without a TTY."""
    return subprocess.run(
        [sys.executable, "-m", "prefetch", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else os.environ.copy(),
        cwd=cwd,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


@pytest.fixture
def cli(home):
    """``cli("get", "mnist", ...)`` runs the real CLI in this test's isolated homes."""
    return run_cli


# -- origin servers ----------------------------------------------------------
from tests.nginx import NginxServer, nginx_binary  # noqa: E402
from tests.origin import OriginServer, SilentServer  # noqa: E402


@pytest.fixture
def origin():
    """A fresh in-process HTTP/1.1 origin (tests/origin.py); put() files into it."""
    with OriginServer() as server:
        yield server


@pytest.fixture
def tls_origin(monkeypatch):
    """HTTPS origin with a throwaway CA; this process and its children trust it
    through REQUESTS_CA_BUNDLE (undo that to test a refused certificate)."""
    with OriginServer(tls=True) as server:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(server.ca_path))
        yield server


@pytest.fixture
def silent_origin():
    """Accepts TCP connections and never answers: for timeout tests."""
    with SilentServer() as server:
        yield server


@pytest.fixture
def nginx_origin(tmp_path):
    """A real nginx serving ``nginx_origin.root``. nginx is required: tests/run.sh installs it."""
    if nginx_binary() is None:
        raise RuntimeError("nginx is not installed: apt-get install nginx (bash tests/run.sh does this)")
    root = tmp_path / "nginx-root"
    root.mkdir()
    with NginxServer(root) as server:
        yield server


# -- the team store: a real S3 server ------------------------------------------
from tests.s3server import SeaweedS3  # noqa: E402


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """SeaweedFS (``weed server -s3``) on loopback for the whole session."""
    with SeaweedS3(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


@pytest.fixture
def s3(s3_server, home, monkeypatch, request):
    """This test's environment points at the S3 server with credentials; ``s3.prefix`` is
    a store URL (``s3://team/<test>/``) no other test uses."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "no-aws-credentials"))
    import re as _re
    import uuid

    s3_server.prefix = f"s3://team/{_re.sub(r'[^A-Za-z0-9]+', '-', request.node.name)[:40]}-{uuid.uuid4().hex[:6]}/"
    return s3_server


# -- a real Jupyter kernel --------------------------------------------------
@pytest.fixture
def kernel(home, tmp_path):
    """A real ipykernel (jupyter_client) in this test's homes; shut down even when the test fails."""
    from tests.kernel import Kernel, kernel_env

    work = tmp_path / "notebook"
    work.mkdir()
    k = Kernel(kernel_env(home), cwd=work)
    try:
        yield k
    finally:
        k.shutdown()
