"""``mirror restore`` after the user re-pointed a dotfile link ``use`` wrote through (real CLI, real
symbolic links, a real ``pip config list``).

``~/.config/pip/pip.conf`` is a dotfile manager's link to ``dotfiles/pip.conf``; ``mirror use``
writes the index into the link's target (the link stays a link); the user then points the link at
``dotfiles2/pip.conf``. ``restore`` followed the link as it is now: it wrote the old bytes into
``dotfiles2/pip.conf`` (the user's other file), or, where the link had led nowhere before ``use``,
removed the user's new link, and left prefetch's ``index-url`` in ``dotfiles/pip.conf``. Now the
re-pointed link is the user's and is left alone (one line says so); ``use``'s change is undone in
the file it changed, the link's old target, and never through a link prefetch did not make.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli

MINE = b"# my pip settings\r\n[global]\r\ntimeout = 7"  # CRLF, no final newline: back byte for byte
OTHER = b"[global]\ntimeout = 9\n"


def _linked_conf(home: Path, *, existing: bool = True) -> tuple[Path, Path, Path]:
    """(the link pip reads, dotfiles/pip.conf, dotfiles2/pip.conf), the link to the first."""
    old = home / "dotfiles" / "pip.conf"
    new = home / "dotfiles2" / "pip.conf"
    old.parent.mkdir()
    new.parent.mkdir()
    if existing:
        old.write_bytes(MINE)
    new.write_bytes(OTHER)
    link = home / ".config" / "pip" / "pip.conf"
    link.parent.mkdir(parents=True)
    link.symlink_to("../../dotfiles/pip.conf")
    return link, old, new


def _repoint(link: Path, to: str) -> None:
    link.unlink()
    link.symlink_to(to)


def _pip_sees(home: Path) -> str:
    return subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                          env={**os.environ, "PIP_CONFIG_FILE": ""}, timeout=120).stdout


def test_restore_puts_back_the_old_target_and_leaves_the_re_pointed_link(home):
    link, old, new = _linked_conf(home)
    used = run_cli("mirror", "use", "tuna")
    assert used.returncode == 0, used.stderr
    assert b"tuna" in old.read_bytes() and new.read_bytes() == OTHER
    _repoint(link, "../../dotfiles2/pip.conf")

    undone = run_cli("mirror", "restore")
    assert undone.returncode == 0, undone.stderr
    assert old.read_bytes() == MINE  # the file `use` changed, as it was
    assert new.read_bytes() == OTHER  # the user's other file, untouched
    assert link.is_symlink() and os.readlink(link) == "../../dotfiles2/pip.conf"
    assert "tuna" not in _pip_sees(home)
    lines = [line for line in undone.stdout.splitlines() if line.startswith("pip:")]
    assert len(lines) == 1 and str(old) in lines[0] and "left alone" in lines[0], undone.stdout


def test_a_link_that_led_nowhere_then_re_pointed_stays_and_the_file_use_made_goes(home):
    link, old, new = _linked_conf(home, existing=False)
    used = run_cli("mirror", "use", "tuna")
    assert used.returncode == 0, used.stderr
    assert b"tuna" in old.read_bytes()
    _repoint(link, "../../dotfiles2/pip.conf")

    undone = run_cli("mirror", "restore")
    assert undone.returncode == 0, undone.stderr
    assert link.is_symlink() and os.readlink(link) == "../../dotfiles2/pip.conf"  # not removed
    assert not old.exists(), old.read_bytes()  # prefetch's index-url gone with the file `use` made
    assert new.read_bytes() == OTHER


def test_the_old_target_deleted_since_is_not_made_again(home):
    link, old, new = _linked_conf(home)
    assert run_cli("mirror", "use", "tuna").returncode == 0
    _repoint(link, "../../dotfiles2/pip.conf")
    old.unlink()

    undone = run_cli("mirror", "restore")
    assert undone.returncode == 0, undone.stderr
    assert not old.exists() and new.read_bytes() == OTHER
    assert link.is_symlink() and os.readlink(link) == "../../dotfiles2/pip.conf"
    assert "nothing to put back" in undone.stdout, undone.stdout


def test_an_old_target_that_is_a_link_now_is_never_written_through(home):
    link, old, new = _linked_conf(home)
    assert run_cli("mirror", "use", "tuna").returncode == 0
    _repoint(link, "../../dotfiles2/pip.conf")
    victim = home / "victim.conf"
    victim.write_bytes(b"victim\n")
    old.unlink()
    old.symlink_to(victim)

    undone = run_cli("mirror", "restore")
    assert undone.returncode == 0, undone.stderr
    assert victim.read_bytes() == b"victim\n" and old.is_symlink() and new.read_bytes() == OTHER
    assert link.is_symlink() and os.readlink(link) == "../../dotfiles2/pip.conf"


def test_a_link_re_pointed_into_a_loop_is_left_and_the_old_target_restored(home):
    link, old, new = _linked_conf(home)
    assert run_cli("mirror", "use", "tuna").returncode == 0
    loop = link.parent / "loop.conf"
    loop.symlink_to("pip.conf")
    _repoint(link, "loop.conf")

    undone = run_cli("mirror", "restore")
    assert undone.returncode == 0, undone.stderr
    assert "Traceback" not in undone.stderr
    assert old.read_bytes() == MINE and new.read_bytes() == OTHER
    assert os.readlink(link) == "loop.conf" and os.readlink(loop) == "pip.conf"


def test_two_uses_either_side_of_the_re_pointing_are_undone_one_file_each(home):
    link, old, new = _linked_conf(home)
    assert run_cli("mirror", "use", "tuna").returncode == 0  # into dotfiles/
    _repoint(link, "../../dotfiles2/pip.conf")
    assert run_cli("mirror", "use", "aliyun").returncode == 0  # through the link as it is now: dotfiles2/
    assert b"aliyun" in new.read_bytes() and b"tuna" in old.read_bytes()

    first = run_cli("mirror", "restore")  # the newest `use`: through the same link, as it saw it
    assert first.returncode == 0, first.stderr
    assert new.read_bytes() == OTHER and b"tuna" in old.read_bytes()
    assert "left alone" not in first.stdout, first.stdout

    second = run_cli("mirror", "restore")  # the first `use`: its file, the link left as the user has it
    assert second.returncode == 0, second.stderr
    assert old.read_bytes() == MINE and new.read_bytes() == OTHER
    assert os.readlink(link) == "../../dotfiles2/pip.conf"
    assert "left alone" in second.stdout, second.stdout
