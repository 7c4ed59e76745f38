"""`mirror use`: the backup directory is flushed (fsync of the directory itself, and of the
folder holding it) before the new config is renamed into place, so that after a machine crash
the backup is found under its name, not only its copy's bytes somewhere. Seen with strace."""

from __future__ import annotations

import re

from tests.test_kill_hostile_mirror import _use_under_strace, env, pytestmark  # noqa: F401 - fixture, skip


def test_the_backup_directory_and_its_parent_are_flushed_before_the_new_config(home, env, tmp_path):
    trace = tmp_path / "trace"
    done = _use_under_strace(env, trace, kill_at=None)
    assert done.returncode == 0, done.stderr
    lines = trace.read_text().splitlines()

    def first(pattern: str) -> int | None:
        return next((i for i, line in enumerate(lines) if re.search(pattern, line)), None)

    backup_dir = first(r"fsync\(\d+</[^>]*/backups/pip-[^/>]*>\)\s+= 0")
    backups = first(r"fsync\(\d+</[^>]*/backups>\)\s+= 0")
    config_in_place = first(r"rename[a-z0-9]*\(.*\.pip\.conf\.[^\"]*\.tmp\", .*/pip/pip\.conf\"")
    shown = "\n".join(lines)
    assert config_in_place is not None, shown
    assert backup_dir is not None and backup_dir < config_in_place, shown
    assert backups is not None and backups < config_in_place, shown
