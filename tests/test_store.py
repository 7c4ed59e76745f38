"""The team store on a real S3 server (SeaweedFS): read, resume, push, seed, export."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import socket
import subprocess
from pathlib import Path

from prefetch.cache.layout import part_path, state_path
from prefetch.engine.resume_state import read_progress
from tests.conftest import run_cli
from tests.helpers import sigkill_when, start_cli
from tests.origin import OriginServer
from tests.slowproxy import SlowProxy

MIB = 1 << 20


def payload(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def refused_url(name: str) -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/{name}"


def registry(path: Path, files: dict[str, tuple[str, bytes]], dataset: str = "toy") -> str:
    """One dataset, one entry per file: name -> (origin URL, bytes)."""
    lines = [f"[{dataset}]"]
    for name, (url, data) in files.items():
        lines += [f"[[{dataset}.files]]", f'name = "{name}"', f'url = "{url}"',
                  f'sha256 = "{hashlib.sha256(data).hexdigest()}"']
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def objects(s3, prefix: str) -> dict[str, tuple[bytes, dict]]:
    """Every object under an s3:// prefix: key -> (bytes, metadata)."""
    bucket, _, key_prefix = prefix[len("s3://"):].partition("/")
    client = s3.client()
    found = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key_prefix):
        for item in page.get("Contents", []):
            answer = client.get_object(Bucket=bucket, Key=item["Key"])
            found[item["Key"][len(key_prefix):]] = (answer["Body"].read(), answer.get("Metadata", {}))
    return found


def put_object(s3, prefix: str, name: str, data: bytes, **extra) -> None:
    bucket, _, key_prefix = prefix[len("s3://"):].partition("/")
    s3.client().put_object(Bucket=bucket, Key=key_prefix + name, Body=data, **extra)


# --------------------------------------------------------------------------- read


def test_mirror_s3_reads_from_the_store_with_credentials(s3, tmp_path, cli, keras_datasets):
    data = payload(3 * MIB, 1)
    put_object(s3, s3.prefix, "a.bin", data)
    reg = registry(tmp_path / "r.toml", {"a.bin": (refused_url("a.bin"), data)})

    proc = cli("get", "toy", "--registry", reg, "--mirror", s3.prefix)

    assert proc.returncode == 0, proc.stderr
    assert (keras_datasets / "a.bin").read_bytes() == data


def test_public_bucket_reads_anonymously(s3, tmp_path, cli, keras_datasets, monkeypatch):
    data = payload(MIB, 2)
    prefix = s3.prefix.replace("s3://team/", "s3://public/")
    put_object(s3, prefix, "pub.bin", data)
    reg = registry(tmp_path / "r.toml", {"pub.bin": (refused_url("pub.bin"), data)})
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

    proc = cli("get", "toy", "--registry", reg, "--mirror", prefix)

    assert proc.returncode == 0, proc.stderr
    assert (keras_datasets / "pub.bin").read_bytes() == data
    # Without credentials the private bucket refuses: a network-class failure, one line.
    put_object(s3, s3.prefix, "priv.bin", data)
    reg2 = registry(tmp_path / "r2.toml", {"priv.bin": (refused_url("priv.bin"), data)}, dataset="priv")
    proc = cli("get", "priv", "--registry", reg2, "--mirror", s3.prefix)
    assert proc.returncode == 3, proc.stderr
    assert "store" in proc.stderr


def test_store_read_resumes_after_sigkill(s3, tmp_path, keras_datasets, monkeypatch):
    """A killed read continues from the bytes on disk, though the presigned URL is new."""
    data = payload(12 * MIB, 3)
    put_object(s3, s3.prefix, "big.bin", data)
    reg = registry(tmp_path / "r.toml", {"big.bin": (refused_url("big.bin"), data)})
    final = keras_datasets / "big.bin"
    with SlowProxy(int(s3.endpoint.rsplit(":", 1)[1]), rate=1 * MIB) as proxy:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
        proc = start_cli("get", "toy", "--registry", reg, "--mirror", s3.prefix, "--connections", "2",
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        def halfway() -> bool:
            progress = read_progress(part_path(final), state_path(final))
            return progress is not None and progress[0] >= 3 * MIB

        sigkill_when(proc, halfway, what="3 MiB on disk")
        done_before = read_progress(part_path(final), state_path(final))[0]
        proxy.rate = 1 << 40  # same endpoint (the store's identity), fast now
        proc = run_cli("get", "toy", "--registry", reg, "--mirror", s3.prefix)

    assert proc.returncode == 0, proc.stderr
    assert final.read_bytes() == data
    assert re.search(r"resuming: [\d.]+ MiB of 12", proc.stderr), proc.stderr
    assert done_before >= 3 * MIB


def test_missing_boto3_is_one_line(s3, tmp_path, cli):
    shadow = tmp_path / "shadow"
    (shadow / "boto3").mkdir(parents=True)
    (shadow / "boto3" / "__init__.py").write_text("raise ImportError('no boto3 here')\n")
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), env.get("PYTHONPATH", "")])

    proc = run_cli("get", "mnist", "--mirror", s3.prefix, env=env)

    assert proc.returncode == 1
    assert proc.stderr.strip() == "prefetch: error: s3:// needs boto3: pip install 'prefetch-datasets[s3]'"


# --------------------------------------------------------------------------- push


def cached_toy(tmp_path, origin, cli, sizes=(20 * MIB, 2 * MIB)) -> tuple[str, dict[str, bytes]]:
    files = {f"f{i}.bin": payload(size, 10 + i) for i, size in enumerate(sizes)}
    for name, data in files.items():
        origin.put(name, data)
    reg = registry(tmp_path / "push.toml", {n: (origin.url_for(n), d) for n, d in files.items()})
    proc = cli("get", "toy", "--registry", reg)
    assert proc.returncode == 0, proc.stderr
    return reg, files


def assert_store_consistent(s3, prefix: str) -> dict[str, bytes]:
    """No object whose bytes differ from the sha256 in its metadata."""
    found = {}
    for key, (body, meta) in objects(s3, prefix).items():
        if key.startswith(".prefetch-claims/"):
            continue
        assert meta.get("sha256") == hashlib.sha256(body).hexdigest(), key
        found[key] = body
    return found


def test_push_uploads_skips_and_resumes_after_sigkill(s3, tmp_path, cli, origin, home):
    reg, files = cached_toy(tmp_path, origin, cli)
    from prefetch.fs.paths import state_dir

    state = state_dir()
    env = os.environ.copy()
    env["PREFETCH_S3_PART_SIZE"] = str(5 * MIB)
    with SlowProxy(int(s3.endpoint.rsplit(":", 1)[1]), rate=1 << 40, up_rate=4 * MIB) as proxy:
        env["AWS_ENDPOINT_URL"] = proxy.url  # uploads crawl: the kill lands mid-push
        proc = start_cli("push", "toy", "--registry", reg, s3.prefix, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def two_parts_up() -> bool:
            bucket, _, key_prefix = s3.prefix[5:].partition("/")
            uploads = s3.client().list_multipart_uploads(Bucket=bucket, Prefix=key_prefix).get("Uploads", [])
            for upload in uploads:
                parts = s3.client().list_parts(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])
                if len(parts.get("Parts", [])) >= 2:
                    return True
            return False

        sigkill_when(proc, two_parts_up, what="two parts uploaded", timeout=120)
        assert (state / "push").is_dir() and list((state / "push").glob("*.json")), "no upload record"
        assert "f0.bin" not in assert_store_consistent(s3, s3.prefix)  # nothing half-made is visible

        proxy.up_rate = None  # the same endpoint, fast now
        proc = run_cli("push", "toy", "--registry", reg, s3.prefix, env=env)

    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^resumed\s+s3://\S+/f0\.bin", proc.stdout, re.M), proc.stdout
    stored = assert_store_consistent(s3, s3.prefix)
    assert stored == files

    proc = run_cli("push", "toy", "--registry", reg, s3.prefix, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("skipped") == 2, proc.stdout


def test_push_refuses_a_corrupted_cache_file(s3, tmp_path, cli, origin, keras_datasets):
    reg, files = cached_toy(tmp_path, origin, cli, sizes=(MIB,))
    (keras_datasets / "f0.bin").write_bytes(b"not the file")

    proc = cli("push", "toy", "--registry", reg, s3.prefix)

    assert proc.returncode == 4, proc.stderr
    assert assert_store_consistent(s3, s3.prefix) == {}


# --------------------------------------------------------------------------- seed


def test_seed_uploads_what_the_store_lacked_and_the_next_machine_reads_it(s3, tmp_path, origin, monkeypatch):
    files = {"s1.bin": payload(6 * MIB, 21), "s2.bin": payload(MIB, 22)}
    for name, data in files.items():
        origin.put(name, data)
    reg = registry(tmp_path / "r.toml", {n: (origin.url_for(n), d) for n, d in files.items()})
    put_object(s3, s3.prefix, "s2.bin", files["s2.bin"],
               Metadata={"sha256": hashlib.sha256(files["s2.bin"]).hexdigest()})

    first = machine_env(tmp_path / "m1")
    proc = run_cli("get", "toy", "--registry", reg, "--seed", s3.prefix, env=first)

    assert proc.returncode == 0, proc.stderr
    assert not origin.data_requests("s2.bin"), "the store had s2.bin: the origin should not serve it"
    assert origin.data_requests("s1.bin")
    assert "seeded the store: uploaded" in proc.stderr
    assert assert_store_consistent(s3, s3.prefix) == files

    # A second machine, whose origin is gone, reads both files from the store.
    reg2 = registry(tmp_path / "r2.toml", {n: (refused_url(n), d) for n, d in files.items()})
    second = machine_env(tmp_path / "m2")
    proc = run_cli("get", "toy", "--registry", reg2, "--seed", s3.prefix, env=second)
    assert proc.returncode == 0, proc.stderr
    for name, data in files.items():
        assert (Path(second["KERAS_HOME"]) / "datasets" / name).read_bytes() == data


def machine_env(root: Path) -> dict[str, str]:
    """Another notebook machine: its own HOME, KERAS_HOME and PREFETCH_HOME."""
    env = os.environ.copy()
    for var, sub in (("HOME", "home"), ("KERAS_HOME", "keras"), ("PREFETCH_HOME", "prefetch")):
        env[var] = str(root / sub)
    env["XDG_CONFIG_HOME"] = str(root / "home" / ".config")
    env["XDG_STATE_HOME"] = str(root / "home" / ".local" / "state")
    return env


def test_mirrors_toml_names_a_store(s3, tmp_path, home, cli, keras_datasets):
    data = payload(MIB, 31)
    put_object(s3, s3.prefix, "n.bin", data)
    config = home / ".prefetch" / "config"
    config.mkdir(parents=True)
    (config / "mirrors.toml").write_text(f'[datasets.team]\nurl = "{s3.prefix}"\n')
    reg = registry(tmp_path / "r.toml", {"n.bin": (refused_url("n.bin"), data)})

    proc = cli("get", "toy", "--registry", reg, "--mirror", "team")

    assert proc.returncode == 0, proc.stderr
    assert (keras_datasets / "n.bin").read_bytes() == data


# --------------------------------------------------------------------------- export


def test_export_writes_the_flat_layout_and_sha256sums(home, tmp_path, cli, origin):
    reg, files = cached_toy(tmp_path, origin, cli, sizes=(MIB, 1000))
    out = tmp_path / "www"

    proc = cli("export", str(out), "toy", "--registry", reg)

    assert proc.returncode == 0, proc.stderr
    for name, data in files.items():
        assert (out / name).read_bytes() == data
    sums = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=out, capture_output=True, text=True)
    assert sums.returncode == 0 and sums.stdout.count(": OK") == 2, sums.stdout + sums.stderr
    # The directory is a working dataset mirror.
    from tests.nginx import NginxServer

    with NginxServer(out) as nginx:
        other = machine_env(tmp_path / "m")
        reg2 = registry(tmp_path / "r2.toml", {n: (refused_url(n), d) for n, d in files.items()})
        proc = run_cli("get", "toy", "--registry", reg2, "--mirror", nginx.url, env=other)
    assert proc.returncode == 0, proc.stderr


def test_export_of_a_dataset_not_cached_fails(home, cli, tmp_path):
    proc = cli("export", str(tmp_path / "www"), "mnist")
    assert proc.returncode == 1
    assert "prefetch get mnist" in proc.stderr


# --------------------------------------------------------------------------- doctor


def test_doctor_checks_the_team_store(s3, tmp_path, home, cli):
    data = payload(MIB, 51)
    put_object(s3, s3.prefix, "d.bin", data)
    config = home / ".prefetch" / "config"
    config.mkdir(parents=True)
    (config / "mirrors.toml").write_text(f'[datasets.team]\nurl = "{s3.prefix}"\n')
    reg = registry(tmp_path / "r.toml", {"d.bin": (refused_url("d.bin"), data)})

    proc = cli("doctor", "toy", "--registry", reg, "--deadline", "2", "--json")

    stores = [s for s in json.loads(proc.stdout)["sources"] if s["kind"] == "store"]
    assert len(stores) == 1 and stores[0]["source"] == s3.prefix, proc.stdout
    assert stores[0]["verdict"] == "ok" and "X-Amz-Signature" not in stores[0]["probe"]


def test_background_seed_job(s3, tmp_path, cli, origin, keras_datasets):
    data = payload(2 * MIB, 61)
    origin.put("bg.bin", data)
    reg = registry(tmp_path / "r.toml", {"bg.bin": (origin.url_for("bg.bin"), data)})

    started = cli("get", "toy", "--registry", reg, "--seed", s3.prefix, "-b")
    assert started.returncode == 0, started.stderr
    done = cli("wait", "--timeout", "120")

    assert done.returncode == 0, done.stdout + done.stderr
    assert (keras_datasets / "bg.bin").read_bytes() == data
    assert assert_store_consistent(s3, s3.prefix) == {"bg.bin": data}


def test_seed_takes_over_the_claim_of_a_seeder_that_died(s3, tmp_path, cli, origin, keras_datasets):
    data = payload(MIB, 71)
    origin.put("dead.bin", data)
    reg = registry(tmp_path / "r.toml", {"dead.bin": (origin.url_for("dead.bin"), data)})
    put_object(s3, s3.prefix, ".prefetch-claims/dead.bin",
               json.dumps({"host": "gone", "pid": 1, "time": 0}).encode())  # never renewed

    proc = cli("get", "toy", "--registry", reg, "--seed", s3.prefix)

    assert proc.returncode == 0, proc.stderr
    assert "seeded the store: uploaded" in proc.stderr
    assert assert_store_consistent(s3, s3.prefix) == {"dead.bin": data}
    assert list(objects(s3, s3.prefix)) == ["dead.bin"]  # our claim was released


def test_seed_into_a_store_that_refuses_still_gets_the_file(s3, tmp_path, cli, origin, keras_datasets, monkeypatch):
    data = payload(MIB, 81)
    origin.put("nb.bin", data)
    reg = registry(tmp_path / "r.toml", {"nb.bin": (origin.url_for("nb.bin"), data)})
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")  # every request is refused

    proc = cli("get", "toy", "--registry", reg, "--seed", s3.prefix)

    assert proc.returncode == 0, proc.stderr
    assert (keras_datasets / "nb.bin").read_bytes() == data
    assert "using the other sources" in proc.stderr and "could not seed the store" in proc.stderr
    # The same store as the only source is a failure that says so (exit 3).
    reg2 = registry(tmp_path / "r2.toml", {"nb.bin": (origin.url_for("nb.bin"), data)}, dataset="only")
    proc = cli("get", "only", "--registry", reg2, "--mirror", s3.prefix, "--cache-dir", str(tmp_path / "other"))
    assert proc.returncode == 3 and "check AWS_ACCESS_KEY_ID" in proc.stderr, proc.stderr
