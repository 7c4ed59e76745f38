"""pip: the real pip reads what `prefetch mirror use` wrote; restore is byte-exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from mirror_helpers import (
    PKG,
    Server,
    build_simple_index,
    build_wheel,
    isolate_tool_env,
    pip_user_conf,
    write_user_mirrors,
)

from prefetch.mirrors.configs.pip import (
    edit_pip_conf,
    pip_config_files,
    pip_override_warnings,
    pip_target_file,
)
from prefetch.mirrors.configs.pip_asked import parse_config_debug

TUNA = "https://pypi.tuna.tsinghua.edu.cn/simple"

EXISTING = (
    "# my settings, keep me\n"
    "[global]\n"
    "timeout = 60\n"
    "; a semicolon comment\n"
    "trusted-host = my.own.host\n"
    "\n"
    "[install]\n"
    "no-warn-script-location = true\n"
)


@pytest.fixture
def env(home, monkeypatch):
    return isolate_tool_env(monkeypatch, home)


def pip(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env, timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_use_writes_user_file_pip_reads_it_and_restore_is_byte_exact(home, env):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_bytes(EXISTING.encode())

    done = run_cli("mirror", "use", "tuna", env=env)
    assert done.returncode == 0, done.stderr
    assert f"pip resolves from: {TUNA}" in done.stdout

    debug = pip("config", "debug", env=env).stdout
    files, keys = parse_config_debug(debug)
    assert keys[conf]["global.index-url"] == TUNA
    assert keys[conf]["global.timeout"] == "60"
    assert keys[conf]["install.no-warn-script-location"] == "true"
    listed = pip("config", "list", env=env).stdout
    assert f"global.index-url='{TUNA}'" in listed
    text = conf.read_text()
    assert "# my settings, keep me" in text and "; a semicolon comment" in text
    assert "trusted-host = my.own.host" in text  # https mirror: no trusted-host of ours, user's kept

    shown = json.loads(run_cli("mirror", "show", "--json", env=env).stdout)
    pip_state = shown["tools"][0]
    assert (pip_state["tool"], pip_state["url"], pip_state["mirror"], pip_state["source"]) == ("pip", TUNA, "tuna", str(conf))
    assert shown["env_overrides"]["PIP_DISABLE_PIP_VERSION_CHECK"] == "1"  # every PIP_* variable is listed

    undo = run_cli("mirror", "restore", env=env)
    assert undo.returncode == 0, undo.stderr
    assert conf.read_bytes() == EXISTING.encode()
    assert "index-url" not in pip("config", "list", env=env).stdout


def test_http_mirror_gets_trusted_host_and_switching_to_https_removes_only_ours(home, env):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_text(EXISTING)

    assert run_cli("mirror", "use", "aliyun-internal", env=env).returncode == 0
    listed = pip("config", "list", env=env).stdout
    assert "global.index-url='http://mirrors.cloud.aliyuncs.com/pypi/simple/'" in listed
    assert "global.trusted-host='my.own.host mirrors.cloud.aliyuncs.com'" in listed

    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    listed = pip("config", "list", env=env).stdout
    assert f"global.index-url='{TUNA}'" in listed
    assert "global.trusted-host='my.own.host'" in listed  # ours removed, the user's kept


def test_real_pip_download_from_local_index_after_mirror_use(home, env, tmp_path):
    root = tmp_path / "index"
    wheel = build_wheel(tmp_path / "built")
    build_simple_index(root, {PKG: wheel})
    server = Server(root).start()
    try:
        write_user_mirrors(home, f'[mirrors.local]\ntitle = "loopback"\npypi = "{server.url}/simple"\n')
        done = run_cli("mirror", "use", "local", env=env)
        assert done.returncode == 0, done.stderr
        assert "trusted-host = 127.0.0.1" in pip_user_conf(home).read_text()

        dest = tmp_path / "downloads"
        got = pip("download", "--no-deps", "--no-cache-dir", "-d", str(dest), PKG, env=env)
        assert got.returncode == 0, got.stdout + got.stderr
        assert (dest / wheel.name).read_bytes() == wheel.read_bytes()
        assert f"/simple/{PKG}/" in server.paths
        assert f"/packages/{wheel.name}" in server.paths
    finally:
        server.stop()


def test_pip_index_url_in_environment_is_warned_about(home, env):
    env = dict(env, PIP_INDEX_URL="https://example.invalid/simple")
    done = run_cli("mirror", "use", "tuna", env=env)
    assert done.returncode == 0, done.stderr
    assert "prefetch: warning: PIP_INDEX_URL=https://example.invalid/simple" in done.stderr
    assert "pip resolves from: https://example.invalid/simple" in done.stdout  # asked pip
    assert len(done.stderr.strip().splitlines()) == 1  # the warning names the index: not said twice
    assert f"index-url = {TUNA}" in pip_user_conf(home).read_text()


def test_install_section_and_pip_config_file_are_warned_about(home, env, tmp_path):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_text("[install]\nindex-url = https://corp.example/simple\n")
    done = run_cli("mirror", "use", "tuna", env=env)
    assert f"{conf} also sets [install] index-url = https://corp.example/simple" in done.stderr

    other = tmp_path / "other.conf"
    other.write_text("[global]\nindex-url = https://other.example/simple\n")
    warnings = pip_override_warnings(conf, index_url=TUNA, env=dict(env, PIP_CONFIG_FILE=str(other)))
    (warning,) = warnings  # one line: that file's index wins, and the user files are skipped
    assert "skips the user files" in warning and str(other) in warning and "https://other.example/simple" in warning


def test_dry_run_prints_diff_and_writes_nothing(home, env):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_text(EXISTING)
    done = run_cli("mirror", "use", "tuna", "--dry-run", env=env)
    assert done.returncode == 0, done.stderr
    assert f"+index-url = {TUNA}" in done.stdout
    assert f"--- {conf}" in done.stdout
    assert conf.read_text() == EXISTING
    assert not (Path(os.environ["PREFETCH_HOME"]) / "state" / "backups").exists()


def test_edit_keeps_bytes_and_line_endings():
    crlf = EXISTING.replace("\n", "\r\n")
    edited = edit_pip_conf(crlf, index_url=TUNA, trusted_host=None).text
    assert edited.replace(f"index-url = {TUNA}\r\n", "") == crlf
    assert "\n" not in edited.replace("\r\n", "")
    # setting the same value again changes nothing
    assert edit_pip_conf(edited, index_url=TUNA, trusted_host=None).text == edited
    # replacing keeps position and the rest
    again = edit_pip_conf(edited, index_url="https://b.example/simple", trusted_host=None).text
    assert again == edited.replace(TUNA, "https://b.example/simple")


def test_scopes_follow_pips_file_rules(tmp_path):
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    assert pip_target_file("user", env=env, platform="linux") == tmp_path / "cfg" / "pip" / "pip.conf"
    assert pip_target_file("site", env=env, prefix=str(tmp_path / "venv"), platform="linux") == tmp_path / "venv" / "pip.conf"
    assert pip_target_file("global", env=env, platform="linux") == Path("/etc/pip.conf")
    files = pip_config_files(env=env, prefix=str(tmp_path / "venv"), platform="linux")
    assert [f.variant for f in files][-3:] == ["user", "user", "site"]
    assert files[-3].path == tmp_path / ".pip" / "pip.conf"  # legacy read first, so ours wins
    existing = tmp_path / "forced.conf"
    existing.write_text("")
    forced = pip_config_files(env=dict(env, PIP_CONFIG_FILE=str(existing)), prefix="/p", platform="linux")
    assert "user" not in [f.variant for f in forced] and forced[-1].path == existing
