"""`mirror use` where the notebook platform sets PIP_CONFIG_FILE / PIP_INDEX_URL: what real pip
then uses, and that every hint prefetch prints would really make pip use the mirror."""

from __future__ import annotations

import subprocess
import sys

from conftest import run_cli
from mirror_helpers import PKG, isolate_tool_env, pip_user_conf, write_user_mirrors
from mirror_helpers import index  # noqa: F401 - fixture


def _pip(env, *args):
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env,
                          timeout=180, stdin=subprocess.DEVNULL)


def test_a_platform_pip_config_file_that_sets_the_index_is_named_with_advice_that_works(home, monkeypatch, index,
                                                                                      tmp_path):
    env = isolate_tool_env(monkeypatch, home)
    platform = tmp_path / "platform-pip.conf"
    platform.write_text("[global]\nindex-url = http://127.0.0.1:9/simple\n")
    env["PIP_CONFIG_FILE"] = str(platform)
    write_user_mirrors(home, f'[mirrors.local]\npypi = "{index.url}/simple"\n')

    done = run_cli("mirror", "use", "local", env=env)
    assert done.returncode == 0, done.stderr
    assert "pip resolves from: http://127.0.0.1:9/simple" in done.stdout  # the truth, asked of pip
    assert f"set by {platform}" in done.stdout
    # --scope site/global is read before PIP_CONFIG_FILE's file: it would lose too, so it is not offered
    assert "--scope" not in done.stderr, done.stderr
    assert "unset PIP_CONFIG_FILE" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one line says what pip uses and why

    # the advice works: without PIP_CONFIG_FILE, real pip takes the user file prefetch wrote
    del env["PIP_CONFIG_FILE"]
    got = _pip(env, "download", "--no-deps", "--retries", "0", "--timeout", "5", "-d", str(tmp_path / "dl"), PKG)
    assert got.returncode == 0, got.stderr
    assert f"index-url = {index.url}/simple" in pip_user_conf(home).read_text()


def test_a_platform_pip_index_url_is_one_line_and_real_pip_follows_it(home, monkeypatch, index, tmp_path):
    env = isolate_tool_env(monkeypatch, home)
    env["PIP_INDEX_URL"] = f"{index.url}/simple"  # the platform's (Colab, AutoDL, PAI set one)
    done = run_cli("mirror", "use", "tuna", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "PIP_INDEX_URL" in lines[0] and f"{index.url}/simple" in lines[0], done.stderr
    assert f"pip resolves from: {index.url}/simple  (asked pip; set by PIP_INDEX_URL)" in done.stdout
    got = _pip(env, "download", "--no-deps", "--retries", "0", "--timeout", "5", "-d", str(tmp_path / "dl"), PKG)
    assert got.returncode == 0, got.stderr  # real pip indeed ignores the pip.conf prefetch wrote
    assert any(p.startswith("/simple/prefetch-probe-pkg") for p in index.paths)
    shown = run_cli("mirror", "show", env=env).stdout
    assert any(line.startswith("pip ") and f"{index.url}/simple" in line and "PIP_INDEX_URL" in line
               for line in shown.splitlines()), shown
