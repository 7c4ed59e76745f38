"""uv, conda and Hugging Face writers; backups, --tool all and restore."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from mirror_helpers import isolate_tool_env, pip_user_conf

from prefetch.mirrors.configs.backup import write_atomic
from prefetch.mirrors.configs.hf import BEGIN
from prefetch.mirrors.configs.uv import read_uv_effective
from prefetch.cache.registry import tomllib

TUNA = "https://pypi.tuna.tsinghua.edu.cn/simple"
TUNA_CONDA = "https://mirrors.tuna.tsinghua.edu.cn/anaconda"

UV_EXISTING = """\
# my uv settings
cache-dir = "/data/uv-cache"  # big disk

[[index]]
name = "corp"  # internal packages
url = "https://corp.example/simple"

[[index]]
name = "old-default"
url = "https://old.example/simple"
default = true
"""

CONDARC_EXISTING = """\
# my conda
ssl_verify: false
channels:
  - conda-forge
  - defaults
envs_dirs:
  - /data/envs
default_channels:
  - https://old.example/pkgs/main
"""


@pytest.fixture
def env(home, monkeypatch):
    return isolate_tool_env(monkeypatch, home)


def uv_toml(home: Path) -> Path:
    return home / ".config" / "uv" / "uv.toml"


def test_uv_default_index_replaced_in_place_comments_kept_and_restored(home, env):
    path = uv_toml(home)
    path.parent.mkdir(parents=True)
    path.write_text(UV_EXISTING)
    for _ in range(2):  # re-running never adds a second default
        done = run_cli("mirror", "use", "tuna", "--tool", "uv", env=env)
        assert done.returncode == 0, done.stderr
    text = path.read_text()
    assert text == UV_EXISTING.replace("https://old.example/simple", TUNA)
    data = tomllib.loads(text)
    assert [i["url"] for i in data["index"] if i.get("default")] == [TUNA]
    assert read_uv_effective(env=env, cwd=home).index_url == TUNA

    assert run_cli("mirror", "restore", "--tool", "uv", env=env).returncode == 0
    assert path.read_text() == UV_EXISTING


def test_uv_env_override_is_warned_and_http_mirror_gets_insecure_host(home, env):
    done = run_cli("mirror", "use", "aliyun-internal", "--tool", "uv",
                   env=dict(env, UV_DEFAULT_INDEX="https://x.example/simple"))
    assert done.returncode == 0, done.stderr
    assert "UV_DEFAULT_INDEX=https://x.example/simple is set in the environment" in done.stderr
    data = tomllib.loads(uv_toml(home).read_text())
    assert data["allow-insecure-host"] == ["mirrors.cloud.aliyuncs.com"]
    assert run_cli("mirror", "use", "tuna", "--tool", "uv", env=env).returncode == 0
    data = tomllib.loads(uv_toml(home).read_text())
    assert "allow-insecure-host" not in data and data["index"] == [{"url": TUNA, "default": True}]
    effective = read_uv_effective(env=dict(env, UV_INDEX_URL="https://y.example/simple"), cwd=home)
    assert (effective.index_url, effective.source) == ("https://y.example/simple", "UV_INDEX_URL")


def test_conda_template_keeps_other_keys_and_users_channels(home, env):
    condarc = home / ".condarc"
    condarc.write_text(CONDARC_EXISTING)
    done = run_cli("mirror", "use", "tuna", "--tool", "conda", env=env)
    assert done.returncode == 0, done.stderr
    assert "conda clean -i" in done.stdout
    text = condarc.read_text()
    assert "ssl_verify: false" in text and "  - /data/envs" in text and "# my conda" in text
    assert "channels:\n  - conda-forge\n  - defaults\n" in text  # the user's channel choice kept
    assert "old.example" not in text
    for line in (f"  - {TUNA_CONDA}/pkgs/main", f"  - {TUNA_CONDA}/pkgs/r", f"  - {TUNA_CONDA}/pkgs/msys2",
                 f"  conda-forge: {TUNA_CONDA}/cloud", f"  pytorch: {TUNA_CONDA}/cloud", "show_channel_urls: true"):
        assert line in text
    assert text.count("default_channels:") == 1
    assert run_cli("mirror", "use", "bfsu", "--tool", "conda", env=env).returncode == 0
    assert condarc.read_text().count("default_channels:") == 1
    assert run_cli("mirror", "restore", "--tool", "conda", env=env).returncode == 0
    assert run_cli("mirror", "restore", "--tool", "conda", env=env).returncode == 0
    assert condarc.read_text() == CONDARC_EXISTING


def test_conda_refused_for_a_mirror_without_conda(home, env):
    done = run_cli("mirror", "use", "tencent", "--tool", "conda", env=env)
    assert done.returncode == 2
    assert "mirror tencent has no conda URL" in done.stderr and "tuna" in done.stderr
    assert not (home / ".condarc").exists()


def test_hf_endpoint_persisted_once_and_restored(home, env):
    bashrc = home / ".bashrc"
    original = "# my bashrc\nalias ll='ls -l'\n"
    bashrc.write_text(original)
    for _ in range(2):
        done = run_cli("mirror", "use", "hf-mirror", "--tool", "hf", env=env)
        assert done.returncode == 0, done.stderr
    assert "%env HF_ENDPOINT=https://hf-mirror.com" in done.stdout
    text = bashrc.read_text()
    assert text.count(BEGIN) == 1 and text.count("export HF_ENDPOINT=https://hf-mirror.com") == 1
    assert text.startswith(original)
    startup = home / ".ipython" / "profile_default" / "startup" / "00-prefetch-hf-endpoint.py"
    # what a new kernel runs sets the variable
    probe = subprocess.run(
        [sys.executable, "-c", f"import os, runpy; runpy.run_path({str(startup)!r}); print(os.environ['HF_ENDPOINT'])"],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert probe.stdout.strip() == "https://hf-mirror.com"
    shell = subprocess.run(["bash", "-c", f"source {bashrc}; echo $HF_ENDPOINT"], capture_output=True, text=True,
                           env=env, timeout=60)
    assert shell.stdout.strip() == "https://hf-mirror.com"

    inherited = run_cli("mirror", "use", "huggingface", "--tool", "hf", env=dict(env, HF_ENDPOINT="https://hf-mirror.com"))
    assert inherited.returncode == 0, inherited.stderr
    assert "prefetch: warning: HF_ENDPOINT=https://hf-mirror.com is set in this environment" in inherited.stderr
    assert bashrc.read_text().count(BEGIN) == 1 and "https://huggingface.co" in bashrc.read_text()

    assert run_cli("mirror", "restore", "--tool", "hf", env=env).returncode == 0  # undo huggingface
    assert run_cli("mirror", "restore", "--tool", "hf", env=env).returncode == 0  # undo hf-mirror (2nd run no-op)
    assert bashrc.read_text() == original
    assert not startup.exists()


def test_tool_all_then_bare_restore_undoes_the_whole_run(home, env):
    done = run_cli("mirror", "use", "tuna", "--tool", "all", env=env)
    assert done.returncode == 0, done.stderr
    assert "hf: skipped (tuna has no hf URL)" in done.stdout
    written = [pip_user_conf(home), uv_toml(home), home / ".condarc"]
    assert all(p.exists() for p in written)

    listed = run_cli("mirror", "restore", "--list", "--json", env=env)
    backups = json.loads(listed.stdout)
    assert sorted(b["tool"] for b in backups) == ["conda", "pip", "uv"]
    assert len({b["operation"] for b in backups}) == 1

    undo = run_cli("mirror", "restore", env=env)
    assert undo.returncode == 0, undo.stderr
    assert "removed (did not exist before)" in undo.stdout
    assert not any(p.exists() for p in written)

    again = run_cli("mirror", "restore", env=env)
    # Nothing left to restore is not a usage error: exit 0, and it says so.
    assert again.returncode == 0 and "nothing to restore: no backup left to restore" in again.stdout, again.stderr


def test_restore_by_name_and_safety_backup(home, env):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_text("[global]\ntimeout = 5\n")
    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    first = json.loads(run_cli("mirror", "restore", "--list", "--json", env=env).stdout)[0]["id"]
    assert run_cli("mirror", "use", "bfsu", env=env).returncode == 0
    done = run_cli("mirror", "restore", first, env=env)
    assert done.returncode == 0, done.stderr
    assert conf.read_text() == "[global]\ntimeout = 5\n"
    # what was replaced (bfsu) was saved and can be put back by name
    safety = done.stdout.split("saved as backup ")[1].split(")")[0]
    assert run_cli("mirror", "restore", safety, env=env).returncode == 0
    assert "https://mirrors.bfsu.edu.cn/pypi/web/simple" in conf.read_text()
    missing = run_cli("mirror", "restore", "pip-nope", env=env)
    assert missing.returncode == 2 and "no backup called 'pip-nope'" in missing.stderr


def test_unknown_tool_and_unknown_mirror_are_usage_errors(home, env):
    bad_tool = run_cli("mirror", "use", "tuna", "--tool", "npm", env=env)
    assert bad_tool.returncode == 2 and "unknown --tool npm" in bad_tool.stderr
    bad_name = run_cli("mirror", "use", "tsinghua", env=env)
    assert bad_name.returncode == 2 and "unknown mirror 'tsinghua'" in bad_name.stderr
    assert not pip_user_conf(home).exists()


def test_atomic_write_keeps_mode_and_follows_symlinks(tmp_path):
    real = tmp_path / "dotfiles" / "pip.conf"
    real.parent.mkdir()
    real.write_text("old")
    os.chmod(real, 0o600)
    link = tmp_path / "pip.conf"
    link.symlink_to(real)
    write_atomic(link, b"new")
    assert link.is_symlink() and real.read_bytes() == b"new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert [p.name for p in real.parent.iterdir()] == ["pip.conf"]  # no temp file left
