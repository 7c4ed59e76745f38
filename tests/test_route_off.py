"""A route that is off: connects the kernel refuses at once (ECONNREFUSED, ENETUNREACH,
EHOSTUNREACH, a ``prohibit`` route's EACCES) to a host this process never reached. Before, ``get``
retried them for a third of ``--timeout`` (7-10 s, eight notes) and ended with "run the same
command again to resume", which mends nothing; now it ends after four refused tries or three
unreachable ones with one line naming the host, what the errno means and the next step (the
notebook's internet, a proxy, a mirror, ``prefetch doctor``), exit 3. A host that was reached
keeps its retries (a server restarting), and another source that answers is used as before.

Unreachable routes are real: ``unshare -n`` (root, as CI runs) gives the run a network namespace
with only loopback (no route anywhere: ENETUNREACH) and ``ip route`` adds an ``unreachable``
(EHOSTUNREACH) and a ``prohibit`` (EACCES) route in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from prefetch.errors import ExitCode
from tests.conftest import run_cli
from tests.origin import OriginServer
from tests.test_bad_input import one_error_line
from tests.test_cli_hostile import refused_port
from tests.test_faults import get_file

RUN_AGAIN = "run the same command again"


def _env(**extra) -> dict:
    env = dict(os.environ, PREFETCH_BACKOFF="0.2", PREFETCH_BACKOFF_CAP="0.5")
    env.update(extra)
    return env


def _retry_notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "; retry " in line]


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("prefetch: error: ")]


def test_a_port_nothing_listens_on_is_four_tries_then_one_line(home, tmp_path):
    port = refused_port()
    got = run_cli("get", f"http://127.0.0.1:{port}/x.bin", "-P", str(tmp_path / "dl"), env=_env())
    assert got.returncode == ExitCode.NETWORK, got.stderr
    assert len(_retry_notes(got.stderr)) == 3, got.stderr  # (the default --retries is 8: eight notes before)
    (error,) = _errors(got.stderr)
    assert f"x.bin: 127.0.0.1:{port}: Connection refused; 4 tries, and it was never reached" in error, error
    assert "nothing listens on that port there" in error and "Check the URL's port" in error, error
    assert "`prefetch doctor`" in error and RUN_AGAIN not in error.lower(), error
    assert not (tmp_path / "dl").exists()  # no .part: not a byte came


def test_a_refused_mirror_gives_way_to_the_origin_at_once(home, origin, tmp_path):
    """Another source of the same file that answers is used, as before: no error, no retry notes."""
    origin.put("a.bin", b"a" * 50_000)
    got = run_cli("get", origin.url_for("a.bin"), "--mirror", f"http://127.0.0.1:{refused_port()}/",
                  "--also-origin", "-P", str(tmp_path), env=_env())
    assert got.returncode == 0, got.stderr
    assert (tmp_path / "a.bin").read_bytes() == b"a" * 50_000
    assert not _retry_notes(got.stderr) and not _errors(got.stderr), got.stderr


@pytest.mark.parametrize("host", ["127.0.0.1", "files.example.org"])
def test_a_server_restarting_after_it_was_reached_keeps_the_retries(home, tmp_path, host):
    """A file came from the host in this process (a kernel's earlier ensure()); it then refuses
    connects for a while (restarting): the next file waits it out instead of giving up after four.
    (A name ``PREFETCH_RESOLVE`` sends to an address is remembered by its name.)"""
    server, again, done = OriginServer().start(), OriginServer(), threading.Event()
    port = server.port
    try:
        server.put("a.bin", b"a" * 20_000)
        env = _env(PREFETCH_RETRIES="50", PREFETCH_TIMEOUT="300", PREFETCH_RESOLVE=f"{host}=127.0.0.1")
        assert get_file(f"http://{host}:{port}/a.bin", tmp_path / "a.bin", env=env).exit_code == 0
        server.stop()
        again.put("b.bin", b"b" * 20_000)
        events: list = []

        def restart() -> None:
            while sum("Connection refused; retry" in (e.message or "") for e in list(events)) < 6:
                if done.wait(0.05):  # (more refused tries than a host never reached gets)
                    return
            again.start(port)

        threading.Thread(target=restart, daemon=True).start()
        result = get_file(f"http://{host}:{port}/b.bin", tmp_path / "b.bin", env=env, events=events, deadline=240)
        assert result.exit_code == 0, result.error
        assert (tmp_path / "b.bin").read_bytes() == b"b" * 20_000
    finally:
        done.set()
        server.stop()
        again.stop()


NAMESPACE = ("ip link set lo up && ip route add unreachable 10.9.9.0/24 && ip route add prohibit 10.9.8.0/24 "
             "&& exec \"$@\"")


@pytest.mark.parametrize("address, said, meaning", [
    ("10.7.7.7", "Network is unreachable", "this machine has no route to that network: its internet may be off"),
    ("10.9.9.1", "No route to host", "a router or firewall on the way says there is no route to that host"),
    ("10.9.8.1", "Permission denied", "this machine's own firewall or routing forbids that route"),
])
def test_an_unreachable_route_is_three_tries_then_one_line(home, tmp_path, address, said, meaning):
    """In a network namespace with only loopback (a notebook without a route out), with
    ``files.example.org`` resolved to an address whose route is missing, unreachable or prohibited."""
    env = _env(PREFETCH_RESOLVE=f"files.example.org={address}")
    got = subprocess.run(["unshare", "-n", "sh", "-c", NAMESPACE, "sh", sys.executable, "-m", "prefetch", "get",
                          "https://files.example.org/data/train.bin", "-P", str(tmp_path / "dl")],
                         capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    assert got.returncode == ExitCode.NETWORK, got.stderr
    assert len(_retry_notes(got.stderr)) == 2, got.stderr
    (error,) = _errors(got.stderr)
    assert f"train.bin: files.example.org:443: {said}; 3 tries, and it was never reached" in error, error
    assert meaning in error and "Turn the notebook's internet on" in error and "--mirror URL" in error, error
    assert RUN_AGAIN not in error.lower(), error


def test_a_hub_host_that_is_unreachable_names_hf_endpoint(home, tmp_path):
    env = _env(PREFETCH_RESOLVE="huggingface.co=10.9.9.1")
    got = subprocess.run(["unshare", "-n", "sh", "-c", NAMESPACE, "sh", sys.executable, "-m", "prefetch", "get",
                          "hf://openai-community/gpt2", "--include", "config.json"],
                         capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    line = one_error_line(got, ExitCode.NETWORK)
    assert "huggingface.co:443: No route to host" in line and "never reached" in line, line
    assert "HF_ENDPOINT (`prefetch mirror use hf-mirror --tool hf`)" in line, line


def test_a_proxy_that_refuses_is_named(home, tmp_path):
    proxy = f"http://alice:secret@127.0.0.1:{refused_port()}"
    env = _env(https_proxy=proxy, http_proxy=proxy)
    env.pop("NO_PROXY", None)
    got = run_cli("get", "http://files.example.org/x.bin", "-P", str(tmp_path), env=env)
    assert got.returncode == ExitCode.NETWORK, got.stderr
    (error,) = _errors(got.stderr)
    assert f"the proxy {proxy.replace('alice:secret@', '')}: Connection refused; 4 tries" in error, error
    assert "*_proxy" in error and "secret" not in got.stderr, error
