"""A ``.gz`` of many gzip members (bgzip's BGZF, a WARC: one member per block or record) that its
server labels ``Content-Encoding: x-gzip`` (Apache's ``AddEncoding``), fetched over several
connections: a range that begins where a member does opens with a gzip header, and it is the
stored file's bytes all the same (its Content-Length is the range's own). Before, every such
range was taken for a gzip made on the fly and refused at each try: exit 3, nothing placed."""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
import zlib

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer
from tests.test_faults import fault_env
from tests.test_gzip_label import LABEL


def _member(payload: bytes, size: int) -> bytes:
    """One gzip member of ``payload``, its header's FNAME padding it to exactly ``size`` bytes."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = packer.compress(payload) + packer.flush()
    pad = size - (10 + len(body) + 8) - 1
    assert pad >= 1
    head = b"\x1f\x8b\x08\x08\0\0\0\0\0\xff" + b"n" * pad + b"\0"
    return head + body + struct.pack("<II", zlib.crc32(payload), len(payload))


@pytest.mark.parametrize("hashed", [False, True])
def test_a_labelled_gz_of_many_members_is_kept_as_sent_over_several_connections(home, tmp_path, hashed):
    data = b"".join(_member(os.urandom(4000), 4096) for _ in range(1024))  # a member at every 4 KiB
    assert len(gzip.decompress(data)) == 4000 * 1024
    www = tmp_path / "www"
    www.mkdir()
    (www / "records.gz").write_bytes(data)
    out = tmp_path / "out"
    extra = ["--sha256", hashlib.sha256(data).hexdigest()] if hashed else []
    with NginxServer(www, limit_rate="2m", location=LABEL) as nginx:
        done = run_cli("get", nginx.url_for("records.gz"), "-P", str(out), "--connections", "4", *extra,
                       env=fault_env(PREFETCH_MIN_SPLIT="65536"), timeout=120)
        ranged = [r for r in nginx.requests() if r[4] == 206]
    assert done.returncode == 0, done.stderr
    assert len(ranged) > 1  # (several ranges, beyond the first)
    assert (out / "records.gz").read_bytes() == data
