"""`mirror use` saves a copy of each config it changes (and, since the fourteenth sitting, a copy
of what it wrote: ``*.written``) under prefetch's state dir. A config can hold a credential (a
private index's ``https://user:token@...`` in pip.conf, an ``export HF_TOKEN=...`` in ~/.bashrc)
that its owner keeps to themselves with ``chmod 600``; the copies were made 0644 (0666 less the
umask) in a 0755 folder: readable by every account on a shared machine. They are now the owner's
alone (0600), whatever the umask, and the file put back by ``restore`` keeps its own mode.
Real CLI processes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from conftest import run_cli
from mirror_helpers import isolate_tool_env, pip_user_conf

TOKEN = "SECRETTOKEN-7f3a"


@pytest.fixture
def env(home, monkeypatch):
    return isolate_tool_env(monkeypatch, home)


def _copies_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_copies_of_a_private_config_are_the_owners_alone(home, env):
    conf = pip_user_conf(home)
    conf.parent.mkdir(parents=True)
    conf.write_text(f"[global]\nextra-index-url = https://alice:{TOKEN}@private.example/simple\n")
    conf.chmod(0o600)
    old = os.umask(0o022)
    try:
        assert run_cli("mirror", "use", "tuna", env=env).returncode == 0
        conf.write_text(conf.read_text() + "timeout = 60\n")  # (an edit: restore keeps it, saving a copy)
        restored = run_cli("mirror", "restore", env=env)
    finally:
        os.umask(old)
    assert restored.returncode == 0, restored.stderr
    state = Path(os.environ["PREFETCH_HOME"])
    copies = _copies_holding(state, TOKEN)
    assert len(copies) >= 3, copies  # (before use, what use wrote, before restore)
    for copy in copies:
        assert stat.S_IMODE(copy.stat().st_mode) & 0o077 == 0, (copy, oct(copy.stat().st_mode))
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600  # (the config itself keeps its mode)
    assert TOKEN in conf.read_text() and "timeout = 60" in conf.read_text()
