"""A resume record beside the file keeps no password and no signature (real nginx on 127.0.0.1,
a real interrupted ``prefetch get``).

``<final>.part.json`` sits beside the data, in a folder others may read (a team's shared disk,
a mounted Drive folder), with the umask's mode (0644). It held each source's URL as given:
``http://alice:s3cret@host/...?...&sig=...`` (a password, an Azure SAS signature valid for
months) in the URL list and again as the key of its validators. Messages and job records never
show them (``redact_url``; a job's URL passwords go through the environment); the resume record
did. Now it names each source by ``net/urls.bare_link`` (the link without its password and its
signing parameters), and a download from the same link, password and signature given again,
still resumes from it (``usable_state`` matches by ``link_key``).
"""

from __future__ import annotations

import os

import pytest

from tests.conftest import run_cli
from tests.test_review17_resigned_resume import DATA, _interrupted_run, slow_bucket

SECRETS = ("s3cret", "SASSECRET")


@pytest.fixture
def nginx(tmp_path):
    with slow_bucket(tmp_path) as server:
        yield server


@pytest.mark.parametrize("how", ["password", "sas"])
def test_the_resume_record_keeps_no_secret_and_still_resumes(nginx, home, tmp_path, how):
    out = tmp_path / "data" / "big.bin"
    url = nginx.url_for("bucket/big.bin")
    if how == "password":
        url = url.replace("http://", "http://alice:s3cret@", 1)
    else:
        url += "?sv=2024-11-04&sp=r&se=2027-01-01&sr=b&sig=SASSECRET"
    _interrupted_run(url, out)
    record = (tmp_path / "data" / "big.bin.part.json").read_text()
    for secret in SECRETS:
        assert secret not in record, record
    assert nginx.url_for("bucket/big.bin") in record, record  # (its link, to resume from)
    get_resumes(nginx, url, out, tmp_path)


def get_resumes(nginx, url: str, out, cwd):
    """``prefetch get url -o out`` resumes the interrupted ``big.bin``: it ends complete, sending
    fewer bytes than the file's; the finished run."""
    sent_before = sum(row[0] for row in nginx.served())
    got = run_cli("get", url, "-o", str(out), cwd=cwd)
    assert got.returncode == 0, got.stderr
    assert out.read_bytes() == DATA
    assert os.listdir(out.parent) == ["big.bin"]
    assert "resuming" in got.stderr and "starting over" not in got.stderr, got.stderr
    assert sum(row[0] for row in nginx.served()) - sent_before < len(DATA)
    return got
