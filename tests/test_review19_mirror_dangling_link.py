"""``mirror restore`` puts a dotfile manager's link back as it was: a ``pip.conf`` that was a
symbolic link to a file not made yet (a dotfiles repository's, before its first commit) keeps
its link, and the file ``use`` made at the link's target goes (a real ``prefetch mirror``, a
real ``pip config list``).

``use`` writes through the link (the link stays a link), creating the target. The backup saw
no file (the link led nowhere), so ``restore`` removed "the file": the user's link itself,
leaving prefetch's ``index-url`` in the dotfiles folder, where the manager linked it back.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import run_cli


def test_restore_keeps_a_dangling_dotfile_link_and_removes_what_use_made(home):
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    link = home / ".config" / "pip" / "pip.conf"
    link.parent.mkdir(parents=True)
    link.symlink_to("../../dotfiles/pip.conf")

    used = run_cli("mirror", "use", "tuna")
    assert used.returncode == 0, used.stderr
    assert link.is_symlink() and "tuna" in (dotfiles / "pip.conf").read_text()

    undone = run_cli("mirror", "restore")
    assert undone.returncode == 0, undone.stderr
    assert link.is_symlink() and os.readlink(link) == "../../dotfiles/pip.conf", undone.stdout
    assert not (dotfiles / "pip.conf").exists(), (dotfiles / "pip.conf").read_text()
    pip = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                         env={**os.environ, "PIP_CONFIG_FILE": ""})
    assert "tuna" not in pip.stdout, pip.stdout


def test_a_link_the_user_made_after_use_is_not_followed_to_remove_its_target(home):
    """(The link is followed only when it is the one ``use`` saw: one made since is the user's.)"""
    conf = home / ".config" / "pip" / "pip.conf"
    used = run_cli("mirror", "use", "tuna")
    assert used.returncode == 0, used.stderr
    mine = home / "dotfiles-pip.conf"
    mine.write_bytes(conf.read_bytes())  # the user keeps the file in their dotfiles now
    conf.unlink()
    conf.symlink_to(mine)

    undone = run_cli("mirror", "restore")
    assert undone.returncode == 0, undone.stderr
    assert mine.exists()
