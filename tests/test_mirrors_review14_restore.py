"""`mirror restore` after the user edited a config that `mirror use` wrote.

The user's later edit (an extra index, a trusted host, a line in ~/.bashrc) is kept where it
does not touch prefetch's own change; where it does, the file goes back as it was before `use`
and one warning line says which edit was dropped and where the edited file is saved.
Real CLI processes, real pip reading the files, a real local index on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from mirror_helpers import PKG, isolate_tool_env, pip_user_conf
from mirror_helpers import index  # noqa: F401 - fixture


@pytest.fixture
def env(home, monkeypatch):
    return isolate_tool_env(monkeypatch, home)



def _pip(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, env=env,
                          timeout=180, stdin=subprocess.DEVNULL)


def test_restore_keeps_an_edit_made_after_use_and_real_pip_uses_both(home, env, index, tmp_path):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    original = f"# my index\n[global]\nindex-url = {index.url}/simple\ntimeout = 60\n"
    conf.write_text(original)
    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    written = conf.read_text()
    assert "tuna" in written
    conf.write_text(written + "extra-index-url = http://127.0.0.1:9/simple\n")  # the user's own edit

    done = run_cli("mirror", "restore", env=env)
    assert done.returncode == 0, done.stderr
    assert conf.read_text() == original + "extra-index-url = http://127.0.0.1:9/simple\n"
    assert "keeping your later edit" in done.stdout and "extra-index-url" in done.stdout, done.stdout
    assert "warning" not in done.stderr, done.stderr

    listed = _pip(env, "config", "list").stdout
    assert f"global.index-url='{index.url}/simple'" in listed and "global.extra-index-url" in listed, listed
    got = _pip(env, "download", "--no-deps", "--retries", "0", "--timeout", "5", "-d", str(tmp_path / "dl"), PKG)
    assert got.returncode == 0, got.stderr  # the user's own index is back in force
    assert any(p.startswith("/simple/prefetch-probe-pkg") for p in index.paths)


def test_an_edit_of_the_line_prefetch_wrote_is_dropped_only_with_one_line_saying_so(home, env):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    original = b"[global]\r\ntimeout = 60\r\n"
    conf.write_bytes(original)
    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    edited = conf.read_bytes().replace(b"tuna.tsinghua.edu.cn", b"mirrors.example.edu.cn")
    conf.write_bytes(edited)  # the user changed prefetch's index-url line itself

    done = run_cli("mirror", "restore", env=env)
    assert done.returncode == 0, done.stderr
    assert conf.read_bytes() == original  # byte for byte, as documented
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "warning" in lines[0] and "mirrors.example.edu.cn" in lines[0], done.stderr
    saved = Path(lines[0].rsplit(" saved as ", 1)[1].split()[0].rstrip(";,."))
    assert saved.read_bytes() == edited  # the edit is not lost: the warning names its copy


def test_a_file_use_created_keeps_the_users_later_lines(home, env):
    bashrc = home / ".bashrc"
    assert not bashrc.exists()
    assert run_cli("mirror", "use", "hf-mirror", "--tool", "hf", env=env).returncode == 0
    with bashrc.open("a") as handle:
        handle.write("alias ll='ls -l'\n")  # the user's own line, added later

    done = run_cli("mirror", "restore", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert bashrc.read_text() == "alias ll='ls -l'\n"  # the block is gone, the alias is not
    startup = home / ".ipython" / "profile_default" / "startup" / "00-prefetch-hf-endpoint.py"
    assert not startup.exists()
    files = {f["path"]: f for r in json.loads(done.stdout) for f in r["files"]}
    assert files[str(bashrc)]["action"] == "merged" and files[str(startup)]["action"] == "removed"


def test_an_unedited_file_is_restored_as_before_and_twice_walks_back(home, env):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_bytes(b"[global]\ntimeout = 60")  # no final newline
    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    assert run_cli("mirror", "use", "bfsu", env=env).returncode == 0
    conf.write_text(conf.read_text() + "trusted-host = example.org\n")
    first = run_cli("mirror", "restore", env=env)
    assert first.returncode == 0 and "warning" not in first.stderr, first.stderr
    assert "tuna" in conf.read_text() and "trusted-host = example.org" in conf.read_text()
    second = run_cli("mirror", "restore", env=env)
    assert second.returncode == 0 and "warning" not in second.stderr, second.stderr
    text = conf.read_text()
    assert "index-url" not in text and "trusted-host = example.org" in text and "timeout = 60" in text
    assert "global.trusted-host='example.org'" in _pip(env, "config", "list").stdout
    third = run_cli("mirror", "restore", env=env)
    assert third.returncode == 0 and "nothing to restore" in third.stdout


def test_restoring_an_older_backup_over_a_later_use_is_no_user_edit(home, env):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    original = b"[global]\ntimeout = 60\n"
    conf.write_bytes(original)
    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    listed = json.loads(run_cli("mirror", "restore", "--list", "--json", env=env).stdout)
    (first,) = [b["id"] for b in listed]
    assert run_cli("mirror", "use", "bfsu", env=env).returncode == 0  # prefetch's own later write
    done = run_cli("mirror", "restore", first, env=env)
    assert done.returncode == 0, done.stderr
    assert conf.read_bytes() == original
    assert "warning" not in done.stderr, done.stderr  # bfsu's line was prefetch's, not the user's


def test_a_key_added_to_the_pip_conf_use_created_survives_restore(home, env):
    conf = pip_user_conf(home)
    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    with conf.open("a") as handle:
        handle.write("trusted-host = example.org\n")  # under the [global] that `use` wrote
    done = run_cli("mirror", "restore", env=env)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    assert conf.read_text() == "[global]\ntrusted-host = example.org\n"
    assert "global.trusted-host='example.org'" in _pip(env, "config", "list").stdout
