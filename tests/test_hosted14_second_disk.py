"""A cache on a second disk (AutoDL's /root/autodl-tmp, PAI's /mnt/workspace), tried for real:
the user links ``~/.cache/huggingface`` to it (HF_HOME unset) or points HF_HOME there; prefetch
follows the user's own link and the real huggingface_hub then loads offline from what it placed.
The same link planted by another account (uid 65534) is refused in one line, nothing written
through it.
"""

from __future__ import annotations

import os

import pytest

from tests.test_hf import MODEL_FILES, assert_offline_loads, hf_env, hub  # noqa: F401


@pytest.fixture
def hf_default_home(hf_env, monkeypatch):  # noqa: F811
    monkeypatch.delenv("HF_HOME")  # huggingface_hub's default: ~/.cache/huggingface
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    return os.environ.copy()


def test_a_users_link_to_the_data_disk_is_followed_and_huggingface_hub_loads_offline(hf_default_home, hub, home,
                                                                                     cli, tmp_path):
    disk = tmp_path / "autodl-tmp" / "hf"
    disk.mkdir(parents=True)
    (home / ".cache").mkdir()
    (home / ".cache" / "huggingface").symlink_to(disk)
    done = cli("get", "hf://acme/tiny")
    assert done.returncode == 0, done.stderr
    assert (disk / "hub" / "models--acme--tiny" / "refs" / "main").is_file()  # on the data disk, through the link
    assert (home / ".cache" / "huggingface").is_symlink()
    assert_offline_loads(hf_default_home, "acme/tiny", MODEL_FILES)


def test_hf_home_on_the_data_disk(hf_env, hub, cli, tmp_path, monkeypatch):  # noqa: F811
    disk = tmp_path / "mnt" / "workspace" / "hf"
    env = dict(hf_env, HF_HOME=str(disk))
    done = cli("get", "hf://acme/tiny", "-b", env=env)
    assert done.returncode == 0, done.stderr
    assert cli("wait", "--timeout", "60", env=env).returncode == 0
    assert (disk / "hub" / "models--acme--tiny").is_dir()
    assert_offline_loads(env, "acme/tiny", MODEL_FILES)


@pytest.mark.skipif(os.geteuid() != 0, reason="planting another account's link needs root")
def test_the_same_link_planted_by_another_account_is_refused(hf_default_home, hub, home, cli, tmp_path):
    disk = tmp_path / "elsewhere"
    disk.mkdir()
    (home / ".cache").mkdir()
    link = home / ".cache" / "huggingface"
    link.symlink_to(disk)
    os.lchown(link, 65534, 65534)
    done = cli("get", "hf://acme/tiny")
    assert done.returncode == 5, (done.returncode, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("prefetch: error: ")]
    assert len(errors) == 1 and "owned by another user (uid 65534)" in errors[0], done.stderr
    assert list(disk.iterdir()) == []


KERAS_LOOKS = """
import sys
import keras.src.utils.file_utils as f
def no_download(url, *args, **kwargs):
    raise AssertionError(f"Keras tried to download {url}")
f.urlretrieve = no_download
print(f.get_file("d.bin", origin=sys.argv[1], file_hash=sys.argv[2]))
"""


def test_a_users_keras_link_to_the_data_disk_is_followed_and_keras_finds_the_file(home, origin, cli, tmp_path,
                                                                                 monkeypatch):
    import hashlib
    import random
    import subprocess
    import sys

    from tests.helpers import write_registry

    data = random.Random(1419).randbytes(100_000)
    sha = hashlib.sha256(data).hexdigest()
    origin.put("d.bin", data)
    monkeypatch.delenv("KERAS_HOME")  # Keras's default: ~/.keras, here the user's link to the data disk
    disk = tmp_path / "autodl-tmp" / "keras"
    disk.mkdir(parents=True)
    (home / ".keras").symlink_to(disk)
    registry = write_registry(tmp_path / "reg.toml", "mydata", origin.url_for("d.bin"), sha256=sha)
    done = cli("get", "mydata", "--registry", str(registry))
    assert done.returncode == 0, done.stderr
    assert (disk / "datasets" / "d.bin").read_bytes() == data and (home / ".keras").is_symlink()
    env = dict(os.environ, KERAS_BACKEND="numpy")
    found = subprocess.run([sys.executable, "-c", KERAS_LOOKS, origin.url_for("d.bin"), sha], env=env,
                           capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr[-2000:]
    assert os.path.realpath(found.stdout.strip().splitlines()[-1]) == str((disk / "datasets" / "d.bin").resolve())
