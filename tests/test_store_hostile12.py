"""The twelfth sitting's hostile review of the team store: odd object names, listings and stores
that answer badly. A real SeaweedFS S3 server on 127.0.0.1 (tests/s3server.py)."""

from __future__ import annotations

from tests.conftest import run_cli
from tests.test_store import MIB, machine_env, objects, payload, refused_url, registry

ODD = "a b#1?ü ✓%41.bin"  # a space, '#', '?', unicode and a '%' escape that must stay literal


def test_an_odd_file_name_is_one_object_for_push_seed_and_mirror(s3, tmp_path, origin, cli, keras_datasets):
    """The key a file is pushed or seeded under is the key it is read from: s3:// object names
    are raw keys (as the AWS CLI writes them), never URL-quoted ones."""
    data = payload(MIB, 1201)
    origin.put("plain.bin", data)
    reg = registry(tmp_path / "r.toml", {ODD: (origin.url_for("plain.bin"), data)})

    proc = cli("get", "toy", "--registry", reg, "--seed", s3.prefix)

    assert proc.returncode == 0, proc.stderr
    assert f"seeded the store: uploaded {s3.prefix}{ODD}" in proc.stderr
    stored = objects(s3, s3.prefix)
    assert set(stored) == {ODD}, set(stored)  # the object, and the seeder's claim released
    # Another machine, origin gone: reads the object the first one seeded.
    dead = registry(tmp_path / "r2.toml", {ODD: (refused_url("plain.bin"), data)})
    for how in ("--seed", "--mirror"):
        proc = run_cli("get", "toy", "--registry", dead, how, s3.prefix, env=machine_env(tmp_path / how[2:]))
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / how[2:] / "keras" / "datasets" / ODD).read_bytes() == data


def test_a_file_pushed_under_an_odd_name_is_read_back_by_mirror(s3, tmp_path, cli, keras_datasets):
    data = payload(MIB, 1202)
    local = tmp_path / ODD
    local.write_bytes(data)

    proc = cli("push", str(local), s3.prefix)
    assert proc.returncode == 0, proc.stderr
    assert set(objects(s3, s3.prefix)) == {ODD}

    reg = registry(tmp_path / "r.toml", {ODD: (refused_url("x.bin"), data)})
    proc = cli("get", "toy", "--registry", reg, "--mirror", s3.prefix)
    assert proc.returncode == 0, proc.stderr
    assert (keras_datasets / ODD).read_bytes() == data


def test_two_pushes_of_one_file_at_once_on_one_machine_both_succeed(s3, tmp_path, home):
    """The second push finds the first one's upload record and joins that upload; whichever
    completes it second must not fail (NoSuchUpload) when the object is there, whole and right."""
    import os
    import subprocess
    import time

    from prefetch.fs.paths import state_dir
    from tests.helpers import start_cli
    from tests.slowproxy import SlowProxy
    from tests.test_store import assert_store_consistent

    data = payload(20 * MIB, 1203)
    local = tmp_path / "big.bin"
    local.write_bytes(data)
    env = os.environ.copy()
    env["PREFETCH_S3_PART_SIZE"] = str(5 * MIB)
    records = state_dir() / "push"
    with SlowProxy(int(s3.endpoint.rsplit(":", 1)[1]), rate=1 << 40, up_rate=8 * MIB) as proxy:
        env["AWS_ENDPOINT_URL"] = proxy.url
        first = start_cli("push", str(local), s3.prefix, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
        deadline = time.monotonic() + 60
        while not (records.is_dir() and any(records.glob("*.json"))):  # the first has started its upload
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        second = start_cli("push", str(local), s3.prefix, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
        outcomes = [(p.wait(timeout=120), *p.communicate()) for p in (first, second)]

    for code, out, err in outcomes:
        assert code == 0, err
        assert err == "", err
    assert assert_store_consistent(s3, s3.prefix) == {"big.bin": data}


class _SickStore:
    """An S3 endpoint on 127.0.0.1 that answers every request 503 SlowDown (a store overloaded
    or down behind its load balancer); ``requests`` counts what reached it."""

    def __init__(self) -> None:
        import http.server
        import threading

        sick = self
        self.requests = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                sick.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                body = b"<?xml version='1.0'?><Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>"
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_store_that_is_down_is_asked_once_per_run_not_once_per_file(s3, tmp_path, origin, cli, keras_datasets,
                                                                        monkeypatch):
    """Every file paid botocore's whole retry budget (5 tries with backoff) to learn the store was
    down, twice with --seed (before and after its download): 10 files, 120 requests and
    minutes. Now the first failure stands for the rest of the run."""
    files = {f"d{i}.bin": payload(64 * 1024, 1210 + i) for i in range(10)}
    for name, data in files.items():
        origin.put(name, data)
    reg = registry(tmp_path / "r.toml", {n: (origin.url_for(n), d) for n, d in files.items()})
    sick = _SickStore()
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", sick.url)
        # Two files at once: the files after the first two find the store known down.
        proc = cli("get", "toy", "--registry", reg, "--seed", s3.prefix, "--host-connections", "2")
    finally:
        sick.close()

    assert proc.returncode == 0, proc.stderr
    for name, data in files.items():
        assert (keras_datasets / name).read_bytes() == data
    assert "using the other sources" in proc.stderr
    assert "not asked again" in proc.stderr
    assert "Traceback" not in proc.stderr
    # botocore tries each request 6 times (5 retries): two files' HEADs, never each file's (60), nor twice (120).
    assert sick.requests <= 2 * 6, sick.requests


def test_seed_reads_a_hashed_url_download_from_the_store(s3, tmp_path, origin, cli):
    """`get URL --sha256 H --seed s3://...` (and as_completed(shard_urls, seed=...)) uploaded the
    file but never read it from the store: every machine fetched every URL from its origin. A
    URL with an expected hash is now read from the store first (the hash checks the object);
    one without stays with its URL (a flat store could hold another host's file of that name)."""
    import hashlib

    data = payload(MIB, 1240)
    origin.put("shard-0.tar", data)
    url, digest = origin.url_for("shard-0.tar"), hashlib.sha256(data).hexdigest()

    proc = cli("get", url, "--sha256", digest, "-P", str(tmp_path / "m1"), "--seed", s3.prefix)
    assert proc.returncode == 0, proc.stderr
    assert objects(s3, s3.prefix)["shard-0.tar"][0] == data

    origin.remove("shard-0.tar")  # the origin is gone (or far away): the team store has it
    proc = cli("get", url, "--sha256", digest, "-P", str(tmp_path / "m2"), "--seed", s3.prefix)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "m2" / "shard-0.tar").read_bytes() == data
    # Without a hash the URL alone is the source.
    proc = cli("get", url, "-P", str(tmp_path / "m3"), "--seed", s3.prefix)
    assert proc.returncode == 3, proc.stderr
    assert not (tmp_path / "m3" / "shard-0.tar").exists()
