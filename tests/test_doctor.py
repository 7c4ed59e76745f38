"""prefetch doctor: effective indexes, overrides, Keras cache, reachability, exit codes."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from mirror_helpers import (
    PKG,
    Server,
    build_simple_index,
    build_wheel,
    closed_port_url,
    isolate_tool_env,
    write_user_mirrors,
)

from prefetch.doctor.checks import Level, check_reachability, run_doctor


@pytest.fixture
def index(tmp_path):
    root = tmp_path / "index"
    build_simple_index(root, {PKG: build_wheel(tmp_path / "built")})
    server = Server(root).start()
    yield server
    server.stop()


def test_healthy_setup_exits_0_and_reports_what_pip_uses(home, monkeypatch, index):
    env = isolate_tool_env(monkeypatch, home)
    env["UV_DEFAULT_INDEX"] = f"{index.url}/simple"
    write_user_mirrors(home, f'[mirrors.local]\npypi = "{index.url}/simple"\n'
                             f'[datasets.team]\nurl = "{index.url}/packages/"\n')
    assert run_cli("mirror", "use", "local", env=env).returncode == 0
    env["PREFETCH_DATASET_MIRROR"] = "team"

    done = run_cli("doctor", "--deadline", "3", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"pip index: {index.url}/simple (local), set by {home}/.config/pip/pip.conf (asked pip)" in out
    assert f"uv: {index.url}/simple (local), set by UV_DEFAULT_INDEX" in out
    assert f"UV_DEFAULT_INDEX={index.url}/simple" in out
    assert f"Keras cache root: {home}/.keras (KERAS_HOME)" in out
    assert "is writable;" in out and "GiB free" in out
    assert f"pip index: {index.url}/simple answers (HTTP" in out
    assert f"dataset mirror (default --mirror): {index.url}/packages/" in out
    assert "[fail]" not in out and "0 problem(s)" in out
    assert "/simple" in index.paths  # the reachability check really went to the server


def test_problems_exit_1_and_each_says_what_to_do(home, monkeypatch, tmp_path):
    env = isolate_tool_env(monkeypatch, home)
    dead = closed_port_url()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env.update(
        PIP_INDEX_URL=f"{dead}/simple",
        UV_DEFAULT_INDEX=f"{dead}/simple",
        KERAS_HOME=str(blocker / "keras"),
        PREFETCH_DATASET_MIRROR="nosuchmirror",
    )
    done = run_cli("doctor", "--deadline", "1", env=env)
    assert done.returncode == 1
    out = done.stdout
    assert f"pip index: {dead}/simple, set by PIP_INDEX_URL (asked pip)" in out
    assert f"PIP_INDEX_URL={dead}/simple overrides every pip.conf" in out
    assert f"[fail] network  pip index: {dead}/simple is unreachable within 1s" in out
    assert "-> switch to a reachable mirror: `prefetch mirror bench`, then `prefetch mirror use fastest`" in out
    # Keras reads /tmp/.keras when KERAS_HOME can be neither written nor created; so does prefetch, with a warning.
    assert f"[warn] keras    KERAS_HOME={blocker}/keras is empty or cannot be written or created: " \
           f"Keras reads /tmp/.keras instead" in out, out
    assert "-> set KERAS_HOME to a writable directory, or unset it" in out
    assert "unknown dataset mirror 'nosuchmirror'" in out
    for line in out.splitlines():
        if line.startswith("[fail]"):
            nxt = out.splitlines()[out.splitlines().index(line) + 1]
            assert nxt.strip().startswith("->"), line


def test_json_output_and_malformed_catalog_reported(home, monkeypatch, index):
    env = isolate_tool_env(monkeypatch, home)
    env["PIP_INDEX_URL"] = f"{index.url}/simple"
    env["UV_DEFAULT_INDEX"] = f"{index.url}/simple"
    path = write_user_mirrors(home, "[mirrors.broken\n")
    done = run_cli("doctor", "--json", "--no-sources", env=env)  # sources: tests/test_doctor_sources.py
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data["ok"] is False
    fails = [c for c in data["checks"] if c["level"] == "fail"]
    assert len(fails) == 1 and fails[0]["topic"] == "mirrors" and str(path) in fails[0]["message"]
    assert any(c["topic"] == "keras" for c in data["checks"])


def test_library_run_doctor_and_reachability(home, monkeypatch, index):
    env = isolate_tool_env(monkeypatch, home)
    env["PIP_INDEX_URL"] = f"{index.url}/simple"
    env["UV_DEFAULT_INDEX"] = f"{index.url}/simple"
    from prefetch.fs.paths import config_dir

    report = run_doctor(config_dir=config_dir(), env=env, deadline=2, sources=False)
    assert not report.failed
    assert any(c.level is Level.OK and c.topic == "network" for c in report.checks)
    results = check_reachability([f"{index.url}/simple/", closed_port_url() + "/"], deadline=1)
    assert [r.ok for r in results] == [True, False]
