"""A background job's record is its owner's alone: it holds the links as given, and a link's
query can be a credential (a real ``prefetch get -b``, a real second uid reading the state dir).

A job's record (``<state dir>/jobs/<id>.json``) stores the request, each URL with its query as
typed: a presigned link's ``X-Amz-Signature`` and ``X-Amz-Credential``, an Azure SAS ``sig``
(valid for months), an API key or ``token=``. Only a URL's ``user:password@`` was kept out of it
(passed to the worker in its environment). The record was written with the umask's mode (0644)
into a state dir made 0755 under a home that is 0755 on many systems (Debian, a JupyterHub's
users): any other account on the machine could read every link's credentials. Now the record is
written 0600 (as its ``.run`` lock already was); ``status``, logs and messages show such a link
as ``?(signed)`` as before.
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
from tests.test_shared_cache import as_other_user

SIGNED = "?X-Amz-Credential=AKIDSECRETCRED&X-Amz-Signature=SIGSECRET0123&token=TOKSECRET"


@pytest.fixture
def open_home(home, monkeypatch):
    """PREFETCH_HOME in a folder others may enter and read (0755 all the way, as a Debian home)."""
    path = Path(tempfile.mkdtemp(prefix="prefetch-home-", dir="/tmp"))
    os.chmod(path, 0o755)
    monkeypatch.setenv("PREFETCH_HOME", str(path))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_another_account_cannot_read_a_jobs_link_credentials(open_home, tmp_path):
    url = "http://127.0.0.1:9/shard-0001.tar" + SIGNED  # (nothing listens: the job fails, its record stays)
    started = run_cli("get", url, "-o", str(tmp_path / "shard.tar"), "-b", cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    assert "SECRET" not in started.stdout + started.stderr
    waited = run_cli("wait", "--timeout", "100", cwd=tmp_path, timeout=150)
    assert "SECRET" not in waited.stdout + waited.stderr

    jobs = open_home / "state" / "jobs"
    records = sorted(jobs.glob("*.json"))
    assert len(records) == 1 and "SIGSECRET0123" in records[0].read_text()  # (the worker needs the link)

    def read_everything():
        seen = []
        for path in jobs.iterdir():
            try:
                seen.append(path.read_text(errors="replace"))
            except PermissionError:
                pass
        leaked = [s for s in ("AKIDSECRETCRED", "SIGSECRET0123", "TOKSECRET") if any(s in text for text in seen)]
        assert not leaked, f"another account read {leaked} in {jobs}"
    as_other_user(read_everything)
    assert stat.S_IMODE(records[0].stat().st_mode) & 0o077 == 0, oct(records[0].stat().st_mode)


# A record an earlier version wrote (0644, the links as given) is its owner's alone once this version reads
# it (that version run for real, from ``git archive``). A record is written again only while its job
# changes, so the record of a job that had ended before the upgrade kept 0644 for good; ``status`` reads
# every record and makes such a record 0600.

EARLIER = "f9af88a9551dba168814e1cdaf7fdb6999f2c0c6"  # main just before bbcb0cc (records 0600)
REPO = Path(__file__).resolve().parents[1]


def version_tree(commit: str, where: Path) -> Path:
    """The ``prefetch`` package as it was at ``commit``, extracted under ``where`` (for ``PYTHONPATH``)."""
    tree = where / f"version-{commit[:8]}"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "prefetch"], capture_output=True,
                             check=True, timeout=120).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=120)
    return tree


@pytest.fixture
def earlier(tmp_path) -> Path:
    return version_tree(EARLIER, tmp_path)


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


def test_a_record_that_is_a_hard_link_to_another_file_of_ours_leaves_that_file_alone(home, tmp_path):
    """``status`` makes an earlier version's 0644 record 0600 as it reads it; a name in the jobs
    folder that is a hard link to another file of ours (as root, any root file: /etc/passwd made
    0600 locks every other account out of user names) is not a record prefetch wrote: its
    mode stays."""
    from prefetch.jobs.records import jobs_dir

    other = tmp_path / "passwd"
    other.write_text('{"id": "j0518-a3f9"}\n')
    other.chmod(0o644)
    jobs = jobs_dir()
    jobs.mkdir(parents=True)
    os.link(other, jobs / "j0518-a3f9.json")
    listed = run_cli("status", cwd=tmp_path)
    assert "Traceback" not in listed.stderr, listed.stderr
    assert stat.S_IMODE(other.stat().st_mode) == 0o644, oct(other.stat().st_mode)
