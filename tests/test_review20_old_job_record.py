"""A job record an earlier version wrote (0644, the links as given) is its owner's alone once this
version reads it (the earlier version run for real, from ``git archive``; a real ``status``; a
real second uid).

bbcb0cc writes each record 0600: it keeps a presigned link's signature, a ``token=`` in a query.
A record is written again only while its job changes, so the record of a job that had ended
before the upgrade kept the earlier version's 0644 for good, readable by every account on a
machine whose home is 0755. ``status`` reads every record: it makes such a record 0600.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.test_review19_job_record_secrets import SIGNED
from tests.test_shared_cache import as_other_user

EARLIER = "f9af88a9551dba168814e1cdaf7fdb6999f2c0c6"  # main just before bbcb0cc (records 0600)
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def earlier(tmp_path) -> Path:
    tree = tmp_path / "earlier"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", EARLIER, "prefetch"], capture_output=True,
                             check=True, timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=120)
    return tree


@pytest.fixture
def open_home(home, monkeypatch):
    """PREFETCH_HOME in a folder others may enter and read (0755 all the way, as a Debian home)."""
    path = Path(tempfile.mkdtemp(prefix="prefetch-home-", dir="/tmp"))
    os.chmod(path, 0o755)
    monkeypatch.setenv("PREFETCH_HOME", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_record_the_earlier_version_wrote_is_made_private_when_read(open_home, earlier, tmp_path):
    old = {**os.environ, "PYTHONPATH": str(earlier)}
    url = "http://127.0.0.1:9/shard-0001.tar" + SIGNED  # (nothing listens: the job fails, its record stays)
    started = run_cli("get", url, "-o", str(tmp_path / "shard.tar"), "-b", env=old, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    run_cli("wait", "--timeout", "100", env=old, cwd=tmp_path, timeout=150)
    records = sorted((open_home / "state" / "jobs").glob("*.json"))
    assert len(records) == 1 and stat.S_IMODE(records[0].stat().st_mode) & 0o044, "the earlier version wrote 0644"

    listed = run_cli("status", cwd=tmp_path)
    assert "SECRET" not in listed.stdout + listed.stderr, listed.stdout
    assert stat.S_IMODE(records[0].stat().st_mode) == 0o600, oct(records[0].stat().st_mode)
    assert "SIGSECRET0123" in records[0].read_text()  # (the same record, its job's links kept)

    def read_it():
        try:
            text = records[0].read_text(errors="replace")
        except PermissionError:
            return
        assert "SIGSECRET0123" not in text, "another account read the link's signature"
    as_other_user(read_it)
