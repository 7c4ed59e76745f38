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
