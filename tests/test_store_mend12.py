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


class _VanishingStore:
    """An S3 endpoint on 127.0.0.1 whose object ``data`` is there to HEAD (size and sha256
    metadata) but gone by the GET (404 NoSuchKey): deleted between the two, as a store's
    lifecycle rule or a teammate's `aws s3 rm` does."""

    def __init__(self, data: bytes) -> None:
        import hashlib

        from tests.helpers import serve_in_thread

        sha = hashlib.sha256(data).hexdigest()
        self.gets = 0
        store = self

        import http.server

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("ETag", '"0123456789abcdef0123456789abcdef"')
                self.send_header("x-amz-meta-sha256", sha)
                self.end_headers()

            def do_GET(self) -> None:
                store.gets += 1
                body = b"<?xml version='1.0'?><Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>"
                self.send_response(404)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server, self.url = serve_in_thread(Handler)

    def close(self) -> None:
        from tests.helpers import stop_server

        stop_server(self.server)


def test_a_store_object_gone_by_the_get_is_named_by_its_s3_name(tmp_path, home, monkeypatch):
    """The 404 of a store object names ``s3://BUCKET/KEY`` in one line: never the presigned
    http URL, its signature or the access key id in it."""
    from tests.test_store import refused_url, registry

    data = payload(MIB, 1221)
    store = _VanishingStore(data)
    try:
        env = os.environ.copy()
        env.update(AWS_ENDPOINT_URL=store.url, AWS_ACCESS_KEY_ID="AKIAMEND12SECRETID", AWS_SECRET_ACCESS_KEY="s3cr3t-mend12",
                   AWS_REGION="us-east-1")
        reg = registry(tmp_path / "r.toml", {"f.bin": (refused_url("f.bin"), data)})
        proc = run_cli("get", "toy", "--registry", reg, "--mirror", "s3://team/mend/", env=env)
    finally:
        store.close()

    assert store.gets >= 1, proc.stderr  # the GET was made: its failure is what is reported
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "s3://team/mend/f.bin answered HTTP 404" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    for secret in ("AKIAMEND12SECRETID", "s3cr3t", "Signature", "Credential", store.url, "127.0.0.1"):
        assert secret not in proc.stderr, (secret, proc.stderr)


def test_a_seed_object_gone_by_the_get_is_named_in_the_fallback_note(tmp_path, home, origin):
    """Read from the seed store alone, the object 404s and the origin takes over: the note
    saying so names the object by its s3:// name, not the store's signed URL."""
    from tests.test_store import registry

    data = payload(MIB, 1222)
    origin.put("f.bin", data)
    store = _VanishingStore(data)
    try:
        env = os.environ.copy()
        env.update(AWS_ENDPOINT_URL=store.url, AWS_ACCESS_KEY_ID="AKIAMEND12SECRETID", AWS_SECRET_ACCESS_KEY="s3cr3t-mend12",
                   AWS_REGION="us-east-1")
        reg = registry(tmp_path / "r.toml", {"f.bin": (origin.url_for("f.bin"), data)})
        proc = run_cli("get", "toy", "--registry", reg, "--seed", "s3://team/mend/", env=env)
    finally:
        store.close()

    assert proc.returncode == 0, proc.stderr
    assert store.gets >= 1, proc.stderr
    assert "s3://team/mend/f.bin answered HTTP 404" in proc.stderr, proc.stderr
    assert "using the other sources" in proc.stderr, proc.stderr
    for secret in ("AKIAMEND12SECRETID", "Signature", "Credential", store.url):
        assert secret not in proc.stderr, (secret, proc.stderr)


def test_the_store_client_has_the_timeouts_of_every_download(home, monkeypatch):
    """docs/correctness.md: PREFETCH_READ_TIMEOUT 15 s, PREFETCH_CONNECT_TIMEOUT 10 s, or a half
    and a third of PREFETCH_TIMEOUT; the store's client had its own 30 s read timeout."""
    from prefetch.store.s3 import open_store

    keys = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    for name, value in keys.items():  # (boto3 reads the credentials from the process's environment)
        monkeypatch.setenv(name, value)
    for env, connect, read in (({}, 10.0, 15.0), ({"PREFETCH_READ_TIMEOUT": "2.5"}, 10.0, 2.5),
                               ({"PREFETCH_CONNECT_TIMEOUT": "4"}, 4.0, 15.0), ({"PREFETCH_TIMEOUT": "6"}, 2.0, 3.0)):
        config = open_store("s3://team/p/", env={**keys, **env}).client.meta.config
        assert (config.connect_timeout, config.read_timeout) == (connect, read), env


def test_a_bad_timeout_variable_is_one_line_for_the_store(tmp_path, home):
    local = tmp_path / "f.bin"
    local.write_bytes(b"x")
    for value in ("abc", "0", "-1"):
        env = os.environ.copy()
        env.update(PREFETCH_READ_TIMEOUT=value, AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_ACCESS_KEY_ID="x",
                   AWS_SECRET_ACCESS_KEY="y")
        proc = run_cli("push", str(local), "s3://team/p/", env=env)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "PREFETCH_READ_TIMEOUT" in proc.stderr
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_bad_seed_lease_is_one_line(tmp_path, home):
    for value in ("abc", "0", "-5", "nan"):
        env = os.environ.copy()
        env.update(PREFETCH_SEED_LEASE=value, AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_ACCESS_KEY_ID="x",
                   AWS_SECRET_ACCESS_KEY="y")
        proc = run_cli("get", "http://127.0.0.1:9/x.bin", "--seed", "s3://team/p/", env=env)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and "PREFETCH_SEED_LEASE" in proc.stderr
