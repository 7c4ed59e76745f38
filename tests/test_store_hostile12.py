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
