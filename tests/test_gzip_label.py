"""A ``.gz`` file its server labels ``Content-Encoding: gzip``: the body is the file as stored.

Apache's ``AddEncoding x-gzip .gz .tgz`` (zlib.net, openssl.org, many university mirrors) and
an S3 object uploaded with ``ContentEncoding: gzip`` send a stored ``.tar.gz`` with
``Content-Encoding: x-gzip`` even to a client that asks for ``identity``. The bytes are the
file: curl and wget keep them, and so must prefetch (before: every answer was refused as
"gzip-encoded", and the download gave up after its retries, exit 3). A server that really
compresses on the fly (a gzip of the ``.gz``, or of a range of it) is still refused, so
nothing doubly compressed is ever placed, and a file whose name and type do not say gzip is
still refused too.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile

import pytest

from tests.conftest import run_cli
from tests.nginx import NginxServer
from tests.test_faults import assert_success, fault_env, get_file, notes
from tests.origin import Gzip

LABEL = "add_header Content-Encoding x-gzip;"  # what AddEncoding does to every .gz answer


def _tar_gz(size: int) -> bytes:
    """A real .tar.gz of ``size`` random (incompressible) bytes."""
    payload = os.urandom(size)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        info = tarfile.TarInfo("corpus/data.bin")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    return raw.getvalue()


def _fast_env() -> dict[str, str]:
    return fault_env(PREFETCH_MIN_SPLIT="65536")


@pytest.mark.parametrize("hashed", [False, True])
def test_a_stored_tar_gz_labelled_gzip_is_kept_as_sent_over_several_connections(home, tmp_path, hashed):
    www = tmp_path / "www"
    www.mkdir()
    data = _tar_gz(3 << 20)
    (www / "corpus.tar.gz").write_bytes(data)
    out = tmp_path / "out"
    extra = ["--sha256", hashlib.sha256(data).hexdigest()] if hashed else []
    with NginxServer(www, limit_rate="2m", location=LABEL) as nginx:
        done = run_cli("get", nginx.url_for("corpus.tar.gz"), "-P", str(out), "--connections", "4", *extra,
                       env=_fast_env(), timeout=120)
        served = nginx.served()
    assert done.returncode == 0, done.stderr
    assert (out / "corpus.tar.gz").read_bytes() == data  # the stored bytes: no layer taken off or added
    with tarfile.open(out / "corpus.tar.gz") as tar:  # (and the archive the user wanted)
        assert tar.getnames() == ["corpus/data.bin"]
    assert [s for s in served if s[1] == 206], served  # ranges still used on such a server
    assert not list(out.glob("*.part*"))


def test_a_file_whose_name_and_type_do_not_say_gzip_is_still_refused(home, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    (www / "table.csv").write_bytes(b"a,b\n1,2\n" * 1000)
    out = tmp_path / "out"
    with NginxServer(www, location=LABEL) as nginx:
        done = run_cli("get", nginx.url_for("table.csv"), "-P", str(out), "--timeout", "3",
                       env=_fast_env(), timeout=120)
    assert done.returncode == 3, (done.returncode, done.stderr)
    assert "gzip-encoded" in done.stderr
    assert not (out / "table.csv").exists()


def test_a_gz_file_compressed_again_on_the_fly_is_refused_and_the_true_bytes_placed(origin, tmp_path):
    """A gzip of the .gz itself (a server compressing on the fly although asked for identity)
    at the file's start: refused (its inner bytes are a gzip header again), retried, and the
    file placed is the stored one, never the doubly compressed body."""
    data = _tar_gz(200 << 10)
    origin.put("model.tar.gz", data)
    origin.add_fault(Gzip(path="model.tar.gz"))
    out = tmp_path / "model.tar.gz"
    events: list = []
    result = get_file(origin.url_for("model.tar.gz"), out, env=fault_env(), connections=1, events=events)
    assert_success(result, out, data, verified=False)
    assert "gzip-encoded" in notes(events)
    assert gzip.decompress(out.read_bytes())[:512] == gzip.decompress(data)[:512]


def test_a_range_of_a_gz_file_compressed_on_the_fly_is_refused(origin, tmp_path):
    data = _tar_gz(600 << 10)
    origin.put("model.tar.gz", data)
    origin.add_fault(Gzip(path="model.tar.gz", only_ranged=True))
    out = tmp_path / "model.tar.gz"
    events: list = []
    sha = hashlib.sha256(data).hexdigest()
    result = get_file(origin.url_for("model.tar.gz"), out, env=fault_env(), sha256=sha, connections=2,
                      events=events)
    assert_success(result, out, data)
    assert "gzip-encoded" in notes(events)


def test_a_list_of_small_gz_files_labelled_gzip_comes_through_the_bulk_lane_as_stored(home, tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    files = {f"shard-{i:03d}.json.gz": gzip.compress(os.urandom(3000)) for i in range(40)}
    for name, data in files.items():
        (www / name).write_bytes(data)
    out = tmp_path / "out"
    with NginxServer(www, location=LABEL) as nginx:
        listing = tmp_path / "list.txt"
        listing.write_text("".join(nginx.url_for(name) + "\n" for name in files))
        done = run_cli("get", "-i", str(listing), "-P", str(out), "-q", env=_fast_env(), timeout=120)
        requests = nginx.requests()
    assert done.returncode == 0, done.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == files
    assert len({conn for conn, *_ in requests}) < len(files)  # kept-alive connections: the lane, not a file each
