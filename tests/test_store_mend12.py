"""The twelfth sitting's mend of the team store: upload records of different files pushed to
one key, store errors named by their s3:// name, the store's timeouts. A real SeaweedFS S3
server on 127.0.0.1 (tests/s3server.py)."""

from __future__ import annotations

import os
import re
import subprocess

from tests.conftest import run_cli
from tests.helpers import sigkill_when, start_cli
from tests.slowproxy import SlowProxy
from tests.test_store import MIB, assert_store_consistent, payload


def _parts_up(s3, count: int):
    """True once an upload in progress under ``s3.prefix`` holds ``count`` parts that no
    upload seen before holds (``seen``: upload ids already counted)."""
    bucket, _, key_prefix = s3.prefix[5:].partition("/")
    seen: set[str] = set()

    def check() -> bool:
        client = s3.client()
        for upload in client.list_multipart_uploads(Bucket=bucket, Prefix=key_prefix).get("Uploads", []):
            if upload["UploadId"] in seen:
                continue
            parts = client.list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
            if len(parts.get("Parts", [])) >= count:
                seen.add(upload["UploadId"])
                return True
        return False

    return check


def test_pushes_of_different_files_to_one_key_keep_their_own_upload_records(s3, tmp_path, home):
    """A push of file A killed mid-upload, then a push of another file B under the same name:
    B's upload must not take over (nor, completing, delete) A's record, so A's next push
    continues its own upload; and no object is ever made of both files' parts."""
    a, b = payload(20 * MIB, 1211), payload(20 * MIB, 1212)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "big.bin").write_bytes(a)
    (tmp_path / "b" / "big.bin").write_bytes(b)
    env = os.environ.copy()
    env["PREFETCH_S3_PART_SIZE"] = str(5 * MIB)
    up = _parts_up(s3, 2)
    with SlowProxy(int(s3.endpoint.rsplit(":", 1)[1]), rate=1 << 40, up_rate=4 * MIB) as proxy:
        env["AWS_ENDPOINT_URL"] = proxy.url
        for side in ("a", "b"):  # both killed with two parts up: two uploads in progress to one key
            proc = start_cli("push", str(tmp_path / side / "big.bin"), s3.prefix, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            sigkill_when(proc, up, what=f"two parts of {side} uploaded", timeout=120)
        assert "big.bin" not in assert_store_consistent(s3, s3.prefix)

        proxy.up_rate = None
        # Both continue at once, each its own upload: whichever completes last is the object,
        # whole; never a mix.
        procs = [start_cli("push", str(tmp_path / side / "big.bin"), s3.prefix, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for side in ("a", "b")]
        outcomes = [(p.wait(timeout=120), *p.communicate()) for p in procs]

    for code, out, err in outcomes:
        assert code == 0, err
        assert re.search(r"^resumed\s+s3://\S+/big\.bin", out, re.M), out  # its own parts reused
    assert assert_store_consistent(s3, s3.prefix)["big.bin"] in (a, b)

    # B pushed whole (it is the object now or is pushed over it), then A: A resumes nothing
    # of B's and the object is exactly A.
    env["AWS_ENDPOINT_URL"] = s3.endpoint
    for side, data in (("b", b), ("a", a)):
        proc = run_cli("push", str(tmp_path / side / "big.bin"), s3.prefix, env=env)
        assert proc.returncode == 0, proc.stderr
        assert assert_store_consistent(s3, s3.prefix)["big.bin"] == data

