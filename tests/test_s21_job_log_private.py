"""A background job's log is its owner's alone, as its record is (a real ``prefetch get -b``, a real
second uid reading the state dir, and the version before this one run for real from ``git archive``).

The record (``<state dir>/jobs/<id>.json``) has been 0600 since the nineteenth sitting; the log
beside it (``<id>.log``) was still created 0644 under a state dir and home that are 0755 on many
systems: its first line is the job's command, every URL and ``-o`` path as typed (a URL's password
hidden), and its lines name each file fetched. Any other account could read what a user fetches and
where it goes. Now the log is created 0600, and one an earlier version left 0644 is made 0600 when
this version next reads its job (``status``, ``log``, ``resume``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests import test_review19_job_record_secrets as review19
from tests.conftest import run_cli
from tests.test_shared_cache import as_other_user

NAME = "clinic-scans-0001.tar"  # what an onlooker must not learn
URL = f"http://127.0.0.1:9/{NAME}"  # (nothing listens: the job fails at once, its record and log stay)
BEFORE = "f060c4f53ffd0455691d50a2717c37d8727d9d1d"  # main before this change: records 0600, logs 0644


open_home = review19.open_home  # (PREFETCH_HOME in a folder others may enter and read, as a Debian home)


def _run_a_failing_job(tmp_path: Path, env: dict | None = None) -> Path:
    """A ``-b`` job run to its end; its log."""
    started = run_cli("get", URL, "-o", str(tmp_path / "out" / NAME), "-b", env=env, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    run_cli("wait", "--timeout", "100", env=env, cwd=tmp_path, timeout=150)
    logs = sorted((Path(os.environ["PREFETCH_HOME"]) / "state" / "jobs").glob("*.log"))
    assert len(logs) == 1 and NAME in logs[0].read_text(), logs  # (what the log holds: the job's own line)
    return logs[0]


def _nobody_reads(path: Path) -> None:
    def read_it():
        try:
            text = path.read_text(errors="replace")
        except PermissionError:
            return
        assert NAME not in text, f"another account read {path}"
    as_other_user(read_it)


def test_a_jobs_log_is_made_private(open_home, tmp_path):
    log = _run_a_failing_job(tmp_path)
    assert stat.S_IMODE(log.stat().st_mode) == 0o600, oct(log.stat().st_mode)
    _nobody_reads(log)


@pytest.fixture
def before(tmp_path) -> Path:
    return review19.version_tree(BEFORE, tmp_path)


@pytest.mark.parametrize("command", ["status", "log"])
def test_a_log_the_version_before_left_readable_is_made_private_when_its_job_is_read(open_home, before, tmp_path,
                                                                                    command):
    log = _run_a_failing_job(tmp_path, env={**os.environ, "PYTHONPATH": str(before)})
    assert stat.S_IMODE(log.stat().st_mode) & 0o044, "the version before left the log readable by others"

    job = log.stem
    shown = run_cli(command, *([job] if command == "log" else []), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert stat.S_IMODE(log.stat().st_mode) == 0o600, oct(log.stat().st_mode)
    assert NAME in log.read_text()  # (the same log, kept)
    _nobody_reads(log)


def test_a_log_that_is_a_hard_link_to_another_file_of_ours_leaves_that_file_alone(open_home, tmp_path):
    """``status`` and ``log`` make an earlier version's 0644 log 0600; a log name that is a hard link
    to another file of ours (as root, any root file: /etc/passwd made 0600 locks every other account
    out of user names) is not a log prefetch wrote: that file's mode stays."""
    log = _run_a_failing_job(tmp_path)
    other = tmp_path / "passwd"
    other.write_text("root:x:0:0::/root:/bin/sh\n")
    other.chmod(0o644)
    log.unlink()
    os.link(other, log)
    for command in (("status",), ("log",)):
        shown = run_cli(*command, cwd=tmp_path)
        assert "Traceback" not in shown.stderr, shown.stderr
        assert stat.S_IMODE(other.stat().st_mode) == 0o644, (command, oct(other.stat().st_mode))
