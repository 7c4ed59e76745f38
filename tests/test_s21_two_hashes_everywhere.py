"""A file with two hashes (a registry entry's `sha256` and `md5`, a URL's `--sha256` and `--md5`) is
checked against both wherever prefetch checks a file, as a URL download is: `verify`, a copy linked
from another cache instead of downloading (adoption), `push` to the team store, `export`, the team
store's object metadata, and the user's file under the name a server gives (`--content-disposition`).
Before, each of those used the first hash alone: a file with the right sha256 and a wrong md5
passed `verify` (exit 0), was linked into place as `cached`, was uploaded to the store. Real origin
and nginx on 127.0.0.1, SeaweedFS for the store, the real CLI.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.test_review15_served_names import _notes, served  # noqa: F401 (fixture)
from tests.test_store import assert_store_consistent, put_object

WRONG_MD5 = hashlib.md5(b"some other file").hexdigest()


@pytest.fixture
def data(origin) -> bytes:
    body = os.urandom(50_000)
    origin.put("d.bin", body)
    return body


def _registry(path: Path, url: str, data: bytes, *, md5: str | None = None) -> str:
    """Dataset ``toy``: one file ``d.bin`` with its sha256 and an md5 (its own unless ``md5`` is given)."""
    path.write_text(f'[toy]\ndescription = "two hashes"\n[[toy.files]]\nname = "d.bin"\nurl = "{url}"\n'
                    f'sha256 = "{hashlib.sha256(data).hexdigest()}"\nmd5 = "{md5 or hashlib.md5(data).hexdigest()}"\n')
    return str(path)


@pytest.fixture
def registries(tmp_path, origin, data) -> tuple[str, str]:
    """(both hashes right, the right sha256 with a wrong md5)."""
    url = origin.url_for("d.bin")
    return (_registry(tmp_path / "good.toml", url, data),
            _registry(tmp_path / "bad.toml", url, data, md5=WRONG_MD5))


def test_verify_checks_the_md5_beside_the_sha256(cli, keras_datasets, data, registries):
    good, bad = registries
    keras_datasets.mkdir(parents=True)
    (keras_datasets / "d.bin").write_bytes(data)
    ok = cli("verify", "toy", "--registry", good)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "sha256+md5 ok" in ok.stdout, ok.stdout
    for target in ("toy", str(keras_datasets / "d.bin")):
        wrong = cli("verify", target, "--registry", bad, "--json")
        assert wrong.returncode == 4, wrong.stdout + wrong.stderr
        (row,) = json.loads(wrong.stdout)
        assert (row["state"], row["algorithm"], row["expected"], row["got"]) == (
            "mismatch", "md5", WRONG_MD5, hashlib.md5(data).hexdigest())


def test_a_file_in_place_with_a_wrong_md5_is_not_cached(cli, keras_datasets, origin, data, registries):
    good, bad = registries
    keras_datasets.mkdir(parents=True)
    (keras_datasets / "d.bin").write_bytes(data)
    proc = cli("get", "toy", "--registry", bad)
    assert proc.returncode == 4, proc.stderr
    assert "does not match its md5" in proc.stderr, proc.stderr
    assert (keras_datasets / "d.bin").read_bytes() == data  # the failed download replaced nothing
    assert cli("get", "toy", "--registry", good).returncode == 0


def test_a_copy_from_another_cache_is_linked_only_when_both_hashes_match(cli, home, keras_datasets, origin, data,
                                                                         registries, tmp_path):
    from prefetch.cache.copies import note_copy
    from prefetch.fs.paths import state_dir

    good, bad = registries
    copy = tmp_path / "torchvision-root" / "d.bin"  # where prefetch placed the same file for another cache
    copy.parent.mkdir()
    copy.write_bytes(data)
    note_copy(state_dir(), "toy/d.bin", copy)

    proc = cli("get", "toy", "--registry", bad)
    assert proc.returncode == 4, proc.stderr
    assert "linked from" not in proc.stderr and not (keras_datasets / "d.bin").exists(), proc.stderr
    assert origin.data_requests("d.bin"), "not linked: downloaded (and refused by its md5)"

    origin.requests.clear()
    proc = cli("get", "toy", "--registry", good)
    assert proc.returncode == 0, proc.stderr
    assert f"linked from {copy} (the same bytes, sha256+md5 ok)" in proc.stderr, proc.stderr
    assert os.path.samefile(copy, keras_datasets / "d.bin") and not origin.data_requests("d.bin")


def test_push_refuses_a_file_whose_md5_is_wrong(s3, cli, keras_datasets, data, registries):
    good, bad = registries
    keras_datasets.mkdir(parents=True)
    (keras_datasets / "d.bin").write_bytes(data)
    proc = cli("push", "toy", "--registry", bad, s3.prefix)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "md5" in proc.stderr and assert_store_consistent(s3, s3.prefix) == {}
    proc = cli("push", "toy", "--registry", good, s3.prefix)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert assert_store_consistent(s3, s3.prefix) == {"d.bin": data}


def test_export_refuses_a_file_whose_md5_is_wrong(cli, keras_datasets, data, registries, tmp_path):
    good, bad = registries
    keras_datasets.mkdir(parents=True)
    (keras_datasets / "d.bin").write_bytes(data)
    proc = cli("export", str(tmp_path / "flat"), "toy", "--registry", bad)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "does not match its md5" in proc.stderr and not (tmp_path / "flat" / "d.bin").exists()
    assert cli("export", str(tmp_path / "flat"), "toy", "--registry", good).returncode == 0
    assert (tmp_path / "flat" / "d.bin").read_bytes() == data


def test_a_store_object_whose_metadata_md5_differs_is_not_read_as_the_file(s3, cli, keras_datasets, origin, data,
                                                                          registries):
    good, bad = registries
    put_object(s3, s3.prefix, "d.bin", data, Metadata={"sha256": hashlib.sha256(data).hexdigest(),
                                                       "md5": hashlib.md5(data).hexdigest()})
    proc = cli("get", "toy", "--registry", bad, "--seed", s3.prefix)
    assert proc.returncode == 4, proc.stderr
    # Not read from the store and found wrong after: the store has no object with these hashes.
    assert "the store lacks s3://" in proc.stderr and "mismatch from" not in proc.stderr, proc.stderr
    assert not (keras_datasets / "d.bin").exists()
    assert assert_store_consistent(s3, s3.prefix) == {"d.bin": data}  # left as it was
    origin.requests.clear()
    proc = cli("get", "toy", "--registry", good, "--seed", s3.prefix)
    assert proc.returncode == 0, proc.stderr
    assert (keras_datasets / "d.bin").read_bytes() == data and not origin.data_requests("d.bin")


def test_a_served_name_is_the_users_file_only_when_both_hashes_match(served, home, tmp_path):
    """`--content-disposition`: the user's own file under the server's name is taken for the one
    asked for only when it matches every hash given; else the download keeps the URL's name."""
    nginx, data = served
    body = data["f/train"]
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.csv").write_bytes(body)
    got = run_cli("get", nginx.url_for("f/train"), "--sha256", hashlib.sha256(body).hexdigest(), "--md5", WRONG_MD5,
                  "--content-disposition", "-P", str(out), cwd=tmp_path)
    assert got.returncode == 4, got.stderr
    (note,) = _notes(got.stderr)
    assert "already has 'train.csv'" in note and "saved under the URL's name train" in note, note
    assert (out / "train.csv").read_bytes() == body and sorted(p.name for p in out.iterdir()) == ["train.csv"]
