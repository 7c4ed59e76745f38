"""A hostile review of the team store: objects that lie, vanish or are not S3 at all."""

from __future__ import annotations

import hashlib
import subprocess

from tests.conftest import run_cli
from tests.test_store import MIB, machine_env, objects, payload, put_object, registry


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _seed_over_a_wrong_object(s3, tmp_path, origin, cli, keras_datasets, name, **extra):
    data = payload(MIB, 101)
    origin.put(name, data)
    reg = registry(tmp_path / "r.toml", {name: (origin.url_for(name), data)})
    put_object(s3, s3.prefix, name, payload(MIB, 102), **extra)  # the right size, other bytes

    proc = cli("get", "toy", "--registry", reg, "--seed", s3.prefix)

    assert proc.returncode == 0, proc.stderr
    assert (keras_datasets / name).read_bytes() == data
    assert "mismatch from s3://" in proc.stderr and "using the other sources" in proc.stderr
    # The verified file replaced the store's wrong copy: the next machine reads it, origin gone.
    assert objects(s3, s3.prefix)[name][0] == data
    reg2 = registry(tmp_path / "r2.toml", {name: ("http://127.0.0.1:9/" + name, data)})
    second = machine_env(tmp_path / "m2")
    proc = run_cli("get", "toy", "--registry", reg2, "--seed", s3.prefix, env=second)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "m2" / "keras" / "datasets" / name).read_bytes() == data


def test_seed_store_object_lying_about_its_hash_is_replaced(s3, tmp_path, origin, cli, keras_datasets):
    """An object whose metadata claims the right sha256 over other bytes (a bad push, bit rot)."""
    _seed_over_a_wrong_object(s3, tmp_path, origin, cli, keras_datasets, "w.bin",
                              Metadata={"sha256": sha(payload(MIB, 101))})


def test_seed_store_object_without_metadata_and_wrong_bytes_is_replaced(s3, tmp_path, origin, cli,
                                                                       keras_datasets):
    """An object put there by other means (no sha256 metadata), of the right size but wrong."""
    _seed_over_a_wrong_object(s3, tmp_path, origin, cli, keras_datasets, "x.bin")


def test_mirror_store_with_wrong_bytes_and_origin(s3, tmp_path, origin, cli, keras_datasets):
    """(Held before this review: the sources are tried one by one; no signature in the output.)"""
    data = payload(MIB, 105)
    origin.put("y.bin", data)
    reg = registry(tmp_path / "r.toml", {"y.bin": (origin.url_for("y.bin"), data)})
    put_object(s3, s3.prefix, "y.bin", payload(MIB, 106))

    proc = cli("get", "toy", "--registry", reg, "--mirror", s3.prefix, "--also-origin")

    assert proc.returncode == 0, proc.stderr
    assert (keras_datasets / "y.bin").read_bytes() == data
    assert "X-Amz-" not in proc.stderr


def test_truncated_object_mirror_only(s3, tmp_path, origin, cli, keras_datasets):
    """(Held: a hash mismatch, exit 4, nothing placed, no signature or key id in the output.)"""
    data = payload(MIB, 107)
    reg = registry(tmp_path / "r.toml", {"t.bin": ("http://127.0.0.1:9/t.bin", data)})
    put_object(s3, s3.prefix, "t.bin", data[: MIB // 2])

    proc = cli("get", "toy", "--registry", reg, "--mirror", s3.prefix)

    assert proc.returncode == 4, proc.stderr
    assert not (keras_datasets / "t.bin").exists()
    assert "X-Amz-" not in proc.stderr and "prefetchtest" not in proc.stderr


class WebPageEverywhere:
    """A web server, not S3, that answers 200 and an HTML page to every method and path
    (``AWS_ENDPOINT_URL`` pointing at a proxy's or a portal's page)."""

    def __enter__(self) -> "WebPageEverywhere":
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                while length > 0:
                    length -= len(self.rfile.read(min(length, 1 << 20)))
                body = b"<html><body>Welcome to nginx!</body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_push_to_an_endpoint_that_is_not_s3_fails_instead_of_claiming_an_upload(s3, tmp_path, cli, monkeypatch):
    small, big = tmp_path / "small.bin", tmp_path / "big.bin"
    small.write_bytes(payload(1000, 111))
    big.write_bytes(payload(6 * MIB, 112))
    monkeypatch.setenv("PREFETCH_S3_PART_SIZE", str(5 * MIB))  # big.bin goes in two parts
    with WebPageEverywhere() as page:
        monkeypatch.setenv("AWS_ENDPOINT_URL", page.url)
        for path in (small, big):
            proc = cli("push", str(path), "s3://team/p/")

            assert proc.returncode == 3, proc.stderr  # before: 0 and "uploaded" (small), a crash (big)
            assert "uploaded" not in proc.stdout
            assert proc.stderr.count("\n") == 1 and "is not an S3 store" in proc.stderr, proc.stderr
            assert "AWS_ENDPOINT_URL" in proc.stderr and "Traceback" not in proc.stderr


def test_a_bucket_that_does_not_exist_is_named_as_such(s3, tmp_path, cli, origin, keras_datasets):
    data = payload(1000, 113)
    origin.put("nb.bin", data)
    reg = registry(tmp_path / "r.toml", {"nb.bin": (origin.url_for("nb.bin"), data)})
    typo = "s3://no-such-team-bucket/p/"

    proc = cli("get", "toy", "--registry", reg, "--mirror", typo)

    # Before: "the store has no s3://no-such-team-bucket/p/nb.bin", as if only the file were missing.
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"prefetch: error: store: the bucket 'no-such-team-bucket' does not exist at {s3.endpoint}; "
        "create it or fix the URL"]
    # With the origin as well, the file comes from there and the note says why.
    proc = cli("get", "toy", "--registry", reg, "--mirror", typo, "--also-origin")
    assert proc.returncode == 0, proc.stderr
    assert "does not exist" in proc.stderr and "using the other sources" in proc.stderr
    assert (keras_datasets / "nb.bin").read_bytes() == data


def test_a_seeder_killed_here_is_not_waited_for_on_the_rerun(s3, tmp_path, origin, keras_datasets, monkeypatch):
    """kill -9 (a restarted notebook kernel) mid-download leaves our claim in the store; the
    rerun on the same machine sees its process is gone and takes the claim over at once,
    instead of waiting for the lease to run out as for a seeder on another machine."""
    from tests.helpers import sigkill_when, start_cli

    data = payload(8 * MIB, 130)
    origin.put("k.bin", data)
    origin.total_rate = MIB
    reg = registry(tmp_path / "r.toml", {"k.bin": (origin.url_for("k.bin"), data)})
    monkeypatch.setenv("PREFETCH_SEED_LEASE", "30")  # (before the fix the rerun waited this long)
    proc = start_cli("get", "toy", "--registry", reg, "--seed", s3.prefix,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    part = keras_datasets / "k.bin.part"
    sigkill_when(proc, lambda: part.exists() and part.stat().st_size > 0, what="a partial download")
    assert ".prefetch-claims/k.bin" in objects(s3, s3.prefix)  # the dead seeder's claim
    origin.total_rate = None

    proc = run_cli("get", "toy", "--registry", reg, "--seed", s3.prefix)

    assert proc.returncode == 0, proc.stderr
    assert "waiting for" not in proc.stderr, proc.stderr
    assert "seeded the store: uploaded" in proc.stderr
    assert set(objects(s3, s3.prefix)) == {"k.bin"}  # the object, no claim left
    assert (keras_datasets / "k.bin").read_bytes() == data


def test_a_live_seeder_on_this_machine_is_still_waited_for(s3, tmp_path, origin, keras_datasets, monkeypatch):
    """The same check leaves a claim whose process runs alone: the second process waits."""
    import time

    from tests.helpers import start_cli

    data = payload(4 * MIB, 131)
    origin.put("l.bin", data)
    origin.total_rate = MIB
    reg = registry(tmp_path / "r.toml", {"l.bin": (origin.url_for("l.bin"), data)})
    first = start_cli("get", "toy", "--registry", reg, "--seed", s3.prefix,
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while ".prefetch-claims/l.bin" not in objects(s3, s3.prefix):
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    second = machine_env(tmp_path / "m2")  # another cache on the same machine

    proc = run_cli("get", "toy", "--registry", reg, "--seed", s3.prefix, env=second)

    origin.total_rate = None
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0 and proc.returncode == 0, err + proc.stderr
    assert "waiting for" in proc.stderr and "is in the store now" in proc.stderr, proc.stderr
    assert len(origin.data_requests("l.bin")) >= 1 and "seeded the store" not in proc.stderr


SIGNED_QUERY = "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAKEYID%2F20260101&X-Amz-Signature=deadbeef"


def test_a_presigned_url_stays_out_of_errors_logs_and_status(home, cli, tls_origin, origin, tmp_path, monkeypatch):
    """A presigned URL (the store's, or one given on the command line) in the errors that name
    their URL: an untrusted certificate (a company's TLS proxy), a redirect loop, a 404. Its key id and
    signature would land in the job's log and `status` (its command, names and error)."""
    tls_origin.put("f.bin", b"x" * 1000)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    for i in range(12):
        origin.set_redirect(f"r{i}", origin.url_for(f"r{i + 1}"))

    tls = cli("get", tls_origin.url_for("f.bin") + SIGNED_QUERY, "-P", str(tmp_path / "a"))
    loop = cli("get", origin.url_for("r0") + SIGNED_QUERY, "-P", str(tmp_path / "b"))
    gone = cli("get", origin.url_for("deleted.bin") + SIGNED_QUERY, "-P", str(tmp_path / "d"))  # an expired
    # presigned URL (403), an object deleted between the store's HEAD and its GET (404)
    started = cli("get", tls_origin.url_for("f.bin") + SIGNED_QUERY, "-P", str(tmp_path / "c"), "-b")
    waited = cli("wait", "--timeout", "60")
    status = cli("status", "--json")

    assert tls.returncode == 3 and "TLS verification failed for https://" in tls.stderr, tls.stderr
    assert loop.returncode == 3 and "too many redirects" in loop.stderr, loop.stderr
    assert gone.returncode == 3 and "deleted.bin?(signed) answered HTTP 404" in gone.stderr, gone.stderr
    assert started.returncode == 0 and waited.returncode == 3, started.stderr + waited.stdout + waited.stderr
    assert "TLS verification failed" in status.stdout
    logs = "".join(p.read_text(errors="replace") for p in (home / ".prefetch").rglob("*.log"))
    assert "TLS verification failed" in logs  # (the job's log: the record itself keeps the URL to run it)
    for text in (tls.stderr, loop.stderr, gone.stderr, waited.stdout + waited.stderr, status.stdout, logs):
        assert "deadbeef" not in text and "AKIAKEYID" not in text, text


def test_an_unreadable_claim_is_taken_over_when_its_lease_ends(s3, tmp_path, cli, origin, keras_datasets,
                                                              monkeypatch):
    """A claim object that is not ours to read (another tool's, another version's, truncated
    JSON) ages by the store's Last-Modified: it no longer blocks every seeder forever."""
    data = payload(MIB, 160)
    origin.put("u.bin", data)
    reg = registry(tmp_path / "r.toml", {"u.bin": (origin.url_for("u.bin"), data)})
    monkeypatch.setenv("PREFETCH_SEED_LEASE", "2")
    for n, body in enumerate((b'{"host": "vm", "pid": 1, "ti', b"[]", b'{"time": "yesterday"}')):
        put_object(s3, s3.prefix, ".prefetch-claims/u.bin", body)

        proc = cli("get", "toy", "--registry", reg, "--seed", s3.prefix, "--cache-dir", str(tmp_path / f"c{n}"),
                   timeout=60)  # (before: waited for the claim forever)

        assert proc.returncode == 0, proc.stderr
        assert "seeded the store: uploaded" in proc.stderr, proc.stderr
        assert set(objects(s3, s3.prefix)) == {"u.bin"}
        s3.client().delete_object(Bucket="team", Key=s3.prefix[len("s3://team/"):] + "u.bin")


def test_a_file_written_to_during_its_push_is_not_stored(s3, tmp_path, cli, home, monkeypatch):
    """``push ./model.ckpt`` while training still writes it: the object's sha256 metadata was
    taken before the upload read the bytes. The upload checks the bytes it sent against it
    and stores nothing when they differ (before: an object whose bytes were not its sha256)."""
    import time

    from tests.helpers import start_cli
    from tests.slowproxy import SlowProxy
    from tests.test_store import assert_store_consistent

    path = tmp_path / "model.ckpt"
    path.write_bytes(payload(12 * MIB, 170))
    monkeypatch.setenv("PREFETCH_S3_PART_SIZE", str(5 * MIB))  # three parts
    with SlowProxy(int(s3.endpoint.rsplit(":", 1)[1]), rate=1 << 40, up_rate=2 * MIB) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        proc = start_cli("push", str(path), s3.prefix, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not list(home.rglob("push/*.json")):  # the upload began: its first part is on its way
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
        with open(path, "r+b") as f:  # the last part changes in place, as a checkpoint being saved
            f.seek(11 * MIB)
            f.write(b"\xff" * MIB)
        out, err = proc.communicate(timeout=120)

    assert proc.returncode == 5, out + err
    assert err.strip().splitlines() == [f"prefetch: error: {path} changed while it was being uploaded, so nothing "
                                        f"was stored as {s3.prefix}model.ckpt; push it again once it is complete"]
    assert assert_store_consistent(s3, s3.prefix) == {}
    assert not list(home.rglob("push/*.json"))  # the next push starts afresh
    proc = cli("push", str(path), s3.prefix)
    assert proc.returncode == 0, proc.stderr
    assert assert_store_consistent(s3, s3.prefix) == {"model.ckpt": path.read_bytes()}
