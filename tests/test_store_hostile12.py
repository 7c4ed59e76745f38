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
