"""Hostile review of `prefetch mirror use|restore` on configs that are odd or not ours.

Real CLI processes, real pip; files owned by another uid need root (uid 65534 exists).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from mirror_helpers import isolate_tool_env, pip_user_conf, write_user_mirrors

NOBODY = 65534
needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")


@pytest.fixture
def env(home, monkeypatch):
    return isolate_tool_env(monkeypatch, home)


def _backups(home: Path) -> list[Path]:
    root = Path(os.environ["PREFETCH_HOME"]) / "state" / "backups"
    return sorted(root.iterdir()) if root.is_dir() else []


@needs_root
def test_a_config_linked_to_another_users_file_is_never_written_through(home, env, tmp_path):
    theirs = tmp_path / "someone-else" / "pip.conf"
    theirs.parent.mkdir()
    theirs.write_bytes(b"[global]\ntimeout = 5\n")
    os.chown(theirs, NOBODY, -1)
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.symlink_to(theirs)

    done = run_cli("mirror", "use", "tuna", env=env)
    assert done.returncode == 5, done.stderr
    assert "another user (uid 65534)" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert theirs.read_bytes() == b"[global]\ntimeout = 5\n"
    assert theirs.stat().st_uid == NOBODY  # replacing it would have made it root's
    assert conf.is_symlink() and _backups(home) == []  # refused before any backup or write


@needs_root
def test_a_config_owned_by_another_uid_is_refused_and_keeps_its_owner(home, env):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_bytes(b"[global]\r\ntimeout = 5")
    os.chown(conf, NOBODY, -1)
    done = run_cli("mirror", "use", "tuna", "--tool", "uv,pip", env=env)
    assert done.returncode == 5 and "uid 65534" in done.stderr, done.stderr
    assert conf.read_bytes() == b"[global]\r\ntimeout = 5" and conf.stat().st_uid == NOBODY
    assert not (home / ".config" / "uv" / "uv.toml").exists()  # uv came first: nothing of the run was written


def test_a_read_only_config_is_left_alone(home, env):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_bytes(b"[global]\ntimeout = 5\n")
    os.chmod(conf, 0o444)
    dry = run_cli("mirror", "use", "tuna", "--dry-run", env=env)
    assert dry.returncode == 5 and "read-only" in dry.stderr, dry.stderr  # a dry run tells the same truth
    done = run_cli("mirror", "use", "tuna", env=env)
    assert done.returncode == 5 and "read-only (mode 0444)" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert conf.read_bytes() == b"[global]\ntimeout = 5\n"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o444


def test_own_symlinked_config_is_still_written_through_and_restored(home, env, tmp_path):
    real = tmp_path / "dotfiles" / "pip.conf"
    real.parent.mkdir()
    original = b"# mine\r\n[global]\r\ntimeout = 5"
    real.write_bytes(original)
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.symlink_to(real)
    assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
    assert conf.is_symlink() and b"tuna" in real.read_bytes()
    assert run_cli("mirror", "restore", env=env).returncode == 0
    assert conf.is_symlink() and real.read_bytes() == original


def _hf_use(home: Path, env: dict) -> tuple[Path, Path, bytes]:
    bashrc = home / ".bashrc"
    original = b"# my bashrc\r\nexport A=1"  # CRLF, no final newline
    bashrc.write_bytes(original)
    done = run_cli("mirror", "use", "hf-mirror", "--tool", "hf", env=env)
    assert done.returncode == 0, done.stderr
    (backup,) = _backups(home)
    startup = home / ".ipython" / "profile_default" / "startup" / "00-prefetch-hf-endpoint.py"
    assert startup.exists() and b"HF_ENDPOINT" in bashrc.read_bytes()
    return backup, startup, original


def test_restore_with_a_missing_copy_changes_no_file(home, env):
    backup, startup, original = _hf_use(home, env)
    meta = json.loads((backup / "meta.json").read_text())
    blob = next(f["blob"] for f in meta["files"] if f["existed"])
    (backup / blob).unlink()
    after_use = (home / ".bashrc").read_bytes()

    done = run_cli("mirror", "restore", env=env)
    assert done.returncode == 5 and "nothing was restored" in done.stderr, done.stderr
    assert startup.exists()  # not removed while the .bashrc could not be put back
    assert (home / ".bashrc").read_bytes() == after_use
    assert _backups(home) == [backup]  # no pre-restore backup of a restore that did not happen


def test_restore_of_a_tampered_copy_is_refused_then_works_once_repaired(home, env):
    backup, startup, original = _hf_use(home, env)
    meta = json.loads((backup / "meta.json").read_text())
    blob = backup / next(f["blob"] for f in meta["files"] if f["existed"])
    blob.write_bytes(b"rm -rf ~\n")
    after_use = (home / ".bashrc").read_bytes()

    done = run_cli("mirror", "restore", env=env)
    assert done.returncode == 4 and "changed after it was saved" in done.stderr, done.stderr
    assert startup.exists() and (home / ".bashrc").read_bytes() == after_use

    blob.write_bytes(original)
    assert run_cli("mirror", "restore", env=env).returncode == 0
    assert not startup.exists() and (home / ".bashrc").read_bytes() == original


def _pip_config(env: dict) -> dict[str, str]:
    from prefetch.mirrors.configs.pip_asked import parse_config_list

    done = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr  # pip can still load every file
    return {k: v for k, v in parse_config_list(done.stdout).items() if not k.startswith(":env:")}


TUNA = "https://pypi.tuna.tsinghua.edu.cn/simple"


@pytest.mark.parametrize(
    "original, expected",
    [
        # an indented key is a key for configparser, not a continuation: replaced, never duplicated
        (b"[global]\n  index-url = https://old/simple\n  timeout = 5\n", {"global.timeout": "5"}),
        (b"[global]\n\tindex-url = https://old/simple\n", {}),
        # an indented header is still a header: the new key must land in [global], not [install]
        (b"[global]\n  timeout = 5\n  [install]\n  no-cache-dir = true\n",
         {"global.timeout": "5", "install.no-cache-dir": "true"}),
        # index_url and index-url are one key for pip (the last wins): the one pip uses is changed
        (b"[global]\r\nindex_url = https://a/simple\r\nindex-url = https://b/simple", {}),
    ],
)
def test_odd_but_valid_pip_conf_is_edited_as_pip_reads_it(home, env, original, expected):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_bytes(original)
    done = run_cli("mirror", "use", "tuna", env=env)
    assert done.returncode == 0 and "pip still resolves" not in done.stderr, done.stderr
    wanted = {"global.index-url": TUNA, **expected}
    seen = _pip_config(env)
    assert {k: seen.get(k) for k in wanted} == wanted and "install.index-url" not in seen
    assert run_cli("mirror", "restore", env=env).returncode == 0
    assert conf.read_bytes() == original


@pytest.mark.parametrize(
    "original, needle",
    [
        (b"\xef\xbb\xbf[global]\nindex-url = https://old/simple\n", "byte-order mark"),
        (b"[global]\ntimeout = 5\n[global]\nretries = 1\n", "section 'global' already exists"),
        (b"index-url = https://old/simple\n", "no section headers"),
    ],
)
def test_a_pip_conf_pip_cannot_load_is_refused_not_made_worse(home, env, original, needle):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_bytes(original)
    done = run_cli("mirror", "use", "tuna", env=env)
    assert done.returncode == 5 and needle in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert conf.read_bytes() == original and _backups(home) == []


def test_a_block_whose_end_marker_was_deleted_never_swallows_the_users_lines(home, env):
    write_user_mirrors(home, '[mirrors.other]\nhf = "https://other.example"\n')
    bashrc = home / ".bashrc"
    mine = "alias ll='ls -l'\nexport PATH=/opt/bin:$PATH\n"
    # the user (or an editor) removed our END line; their own lines follow the orphan BEGIN
    bashrc.write_text(f"a=1\n# >>> prefetch HF_ENDPOINT >>>\nexport HF_ENDPOINT=https://old\n{mine}")
    assert run_cli("mirror", "use", "hf-mirror", "--tool", "hf", env=env).returncode == 0
    assert run_cli("mirror", "use", "other", "--tool", "hf", env=env).returncode == 0
    assert mine in bashrc.read_text()
    seen = subprocess.run(["bash", "-c", 'source "$HOME/.bashrc"; echo "$HF_ENDPOINT"'], env=env,
                          capture_output=True, text=True, timeout=60)
    assert seen.stdout.strip() == "https://other.example", seen.stderr


def test_show_names_the_file_that_really_sets_pips_index(home, env):
    """`pip config debug` lists a variant's merged keys under each of its files, so a key of the
    legacy ~/.pip/pip.conf also appears under ~/.config/pip/pip.conf; the message blamed the
    file prefetch had just written."""
    legacy = home / ".pip" / "pip.conf"
    legacy.parent.mkdir()
    legacy.write_text("[install]\nindex-url = https://legacy.example/simple\n")
    done = run_cli("mirror", "use", "tuna", env=env)
    assert done.returncode == 0, done.stderr
    assert "[install] index-url = https://legacy.example/simple" in done.stderr  # warned about
    assert f"set by {legacy})" in done.stdout, done.stdout
    show = json.loads(run_cli("mirror", "show", "--json", env=env).stdout)
    pip_row = next(row for row in show["tools"] if row["tool"] == "pip")
    assert pip_row["url"] == "https://legacy.example/simple" and pip_row["source"] == str(legacy)


def _ipython(env: dict, cwd, code: str, *quick: str) -> str:
    """The last line a real IPython session (HF_ENDPOINT not inherited) prints for ``code``."""
    env = {k: v for k, v in env.items() if k != "HF_ENDPOINT"}
    done = subprocess.run([sys.executable, "-m", "IPython", *quick, "-c", code], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    return (done.stdout.strip().splitlines() or [done.stderr])[-1]


@pytest.mark.parametrize("layout", ["xdg-profile", "tilde-ipythondir"])
def test_hf_startup_file_goes_where_ipython_looks(home, env, tmp_path, layout):
    pytest.importorskip("IPython")
    cwd = tmp_path / "work"
    cwd.mkdir()
    if layout == "xdg-profile":  # IPython uses ~/.config/ipython when ~/.ipython does not exist
        (home / ".config" / "ipython" / "profile_default").mkdir(parents=True)
        expected = home / ".config" / "ipython"
    else:  # `%env IPYTHONDIR=~/ipy`: IPython expands the ~
        env = dict(env, IPYTHONDIR="~/ipy")
        expected = home / "ipy"
    done = run_cli("mirror", "use", "hf-mirror", "--tool", "hf", env=env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    startup = expected / "profile_default" / "startup" / "00-prefetch-hf-endpoint.py"
    assert startup.is_file()
    assert not (home / ".ipython").exists() and not (cwd / "~").exists()
    where = "from IPython.paths import get_ipython_dir; print(get_ipython_dir())"
    assert Path(_ipython(env, cwd, where, "--quick")) == expected  # (--quick: no startup files)
    assert _ipython(env, cwd, "import os; print(os.environ.get('HF_ENDPOINT'))") == "https://hf-mirror.com"
    assert run_cli("mirror", "restore", env=env, cwd=tmp_path).returncode == 0
    assert not startup.exists()


def test_a_mirrors_toml_with_a_byte_order_mark_is_read(home, env):
    """Notepad and other editors on Windows start a UTF-8 file with a BOM; TOML readers that
    refuse it (tomllib) would make every mirror command fail on the user's catalog."""
    path = write_user_mirrors(home, '[mirrors.bomlab]\npypi = "https://pypi.bomlab.example/simple"\n')
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    listed = run_cli("mirror", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "bomlab" in listed.stdout
