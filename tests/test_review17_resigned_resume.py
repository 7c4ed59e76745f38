"""A presigned link signed again resumes its ``.part`` (real nginx on 127.0.0.1, a real
interrupted ``prefetch get``).

A presigned S3/OSS/GCS GET or an Azure SAS link lives for minutes to days; a download of a
large file outlives it, the run is stopped (the kernel restarted, the link expired), and the
user asks the portal for a new link: the same object, a new ``X-Amz-Date``/``X-Amz-Signature``.
The completion record already took that for the same link (``net/urls.link_key``: ``cached``,
no request), but the ``.part``'s resume record compared URLs exactly: "saved state does not fit
this download; starting over" and every byte on disk was downloaded again. Now a resume record
fits a link whose key is one of its links' (the ETag it saved still guards the resumed bytes:
``If-Range``, and the kept bytes are sampled when no hash will judge the file); another file's
link (``?v=2``) still starts over.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer
from tests.test_jobs import poll

DATA = random.Random(1701).randbytes(3_000_000)
SIGNED = "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date={date}&X-Amz-Expires=300&X-Amz-Signature={sig}"


def slow_bucket(tmp_path):
    """nginx at 400 KB/s serving DATA as ``bucket/big.bin``."""
    root = tmp_path / "www"
    (root / "bucket").mkdir(parents=True)
    (root / "bucket" / "big.bin").write_bytes(DATA)
    return NginxServer(root, limit_rate="400k")


@pytest.fixture
def nginx(tmp_path):
    with slow_bucket(tmp_path) as server:
        yield server


def _interrupted_run(url: str, out) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "prefetch", "get", url, "-o", str(out), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    state = out.parent / (out.name + ".part.json")
    try:
        poll(lambda: state.exists() and b'"done": [\n  [' in state.read_bytes(), timeout=60, what="bytes in the state")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    assert sorted(os.listdir(out.parent)) == ["big.bin.part", "big.bin.part.json"], proc.stderr.read()


@pytest.mark.parametrize("again", ["resigned", "other", "changed"])
def test_a_link_signed_again_resumes_its_part(nginx, home, tmp_path, again):
    out = tmp_path / "data" / "big.bin"
    url = nginx.url_for("bucket/big.bin")
    _interrupted_run(url + SIGNED.format(date="20261128T000000Z", sig="aaaa"), out)
    kept = (tmp_path / "data" / "big.bin.part.json").read_bytes()
    sent_before = sum(row[0] for row in nginx.served())
    want = DATA
    if again == "changed":  # the object was replaced between the runs (same size): never stitched
        want = DATA[::-1]
        (nginx.root / "bucket" / "big.bin").write_bytes(want)
        os.utime(nginx.root / "bucket" / "big.bin", (1, 1))

    second = url + (SIGNED.format(date="20261128T020000Z", sig="bbbb") if again != "other" else "?v=2")
    got = run_cli("get", second, "-o", str(out), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert out.read_bytes() == want
    assert os.listdir(out.parent) == ["big.bin"]
    sent = sum(row[0] for row in nginx.served()) - sent_before
    if again == "resigned":
        assert "starting over" not in got.stderr, got.stderr
        assert "resuming" in got.stderr, got.stderr
        assert sent < len(DATA), (sent, len(DATA), kept)  # the bytes on disk were not fetched again
    elif again == "other":  # another file's link: its bytes are not stitched onto this one's
        assert "starting over" in got.stderr, got.stderr
        assert sent >= len(DATA), (sent, len(DATA))
    else:  # the saved ETag went with the new link's resumed request (If-Range): the change is seen as one
        assert "the remote file changed" in got.stderr, got.stderr
