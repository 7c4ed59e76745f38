"""tf-keras ignores KERAS_HOME: when it is installed, the legacy names also go to ~/.keras."""

from __future__ import annotations

import os

from tests.archives import tar_gz
from tests.conftest import run_cli


def fake_installed(site: "os.PathLike", name: str, version: str) -> None:
    """A real dist-info directory, so importlib.metadata finds the package as installed."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def write_registry(path, url, sha):
    path.write_text(
        "[toy]\n[[toy.files]]\n"
        f'name = "toy.tar.gz"\nurl = "{url}"\nsha256 = "{sha}"\n'
        'target = "toy-batches.tar.gz"\nalso = ["toy-batches-target_archive"]\n'
        'extract = [".", "toy-batches-target"]\n'
    )


def toy_with_tf_keras(origin, tmp_path):
    """The toy archive on the origin, its registry, and an environment where tf-keras looks installed."""
    import hashlib

    archive = tar_gz({"a.bin": b"x" * 1000}, folder="toy-batches")
    origin.put("toy.tar.gz", archive)
    registry = tmp_path / "reg.toml"
    write_registry(registry, origin.url_for("toy.tar.gz"), hashlib.sha256(archive).hexdigest())
    site = tmp_path / "site"
    fake_installed(site, "tf_keras", "2.17.0")
    env = dict(os.environ, PYTHONPATH=str(site) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return archive, registry, env


def test_tf_keras_installed_gets_its_names_under_home(home, origin, tmp_path):
    archive, registry, env = toy_with_tf_keras(origin, tmp_path)
    keras_home = home / "kh"
    env["KERAS_HOME"] = str(keras_home)

    proc = run_cli("get", "toy", "--registry", str(registry), env=env)

    assert proc.returncode == 0, proc.stderr
    ours = keras_home / "datasets"
    assert (ours / "toy-batches.tar.gz").read_bytes() == archive
    assert (ours / "toy-batches-target" / "toy-batches" / "a.bin").exists()
    tf = home / ".keras" / "datasets"  # where tf-keras looks, KERAS_HOME or not
    assert (tf / "toy-batches.tar.gz").read_bytes() == archive
    assert (tf / "toy-batches" / "a.bin").read_bytes() == b"x" * 1000
    assert not (tf / "toy-batches-target_archive").exists()  # Keras >= 3.6 names stay in KERAS_HOME


def test_without_tf_keras_nothing_goes_to_home(home, origin, tmp_path):
    import hashlib

    archive = tar_gz({"a.bin": b"y" * 10}, folder="toy-batches")
    origin.put("toy.tar.gz", archive)
    registry = tmp_path / "reg.toml"
    write_registry(registry, origin.url_for("toy.tar.gz"), hashlib.sha256(archive).hexdigest())
    env = dict(os.environ, KERAS_HOME=str(home / "kh"))

    proc = run_cli("get", "toy", "--registry", str(registry), env=env)

    assert proc.returncode == 0, proc.stderr
    assert (home / "kh" / "datasets" / "toy-batches.tar.gz").exists()
    assert not (home / ".keras").exists()


def test_rm_also_removes_the_tf_keras_copies_that_keras_home_added(home, origin, tmp_path):
    """Issue 21, item 6: `prefetch rm` with KERAS_HOME set removes what `get` put in ~/.keras for tf-keras."""
    archive, registry, env = toy_with_tf_keras(origin, tmp_path)
    env["KERAS_HOME"] = str(home / "kh")
    assert run_cli("get", "toy", "--registry", str(registry), env=env).returncode == 0
    tf = home / ".keras" / "datasets"
    assert (tf / "toy-batches.tar.gz").exists() and (tf / "toy-batches" / "a.bin").exists()
    (tf / "unrelated.npz").write_bytes(b"keep me")

    proc = run_cli("rm", "toy", "--registry", str(registry), env=env)

    assert proc.returncode == 0, proc.stderr
    assert not (home / "kh" / "datasets" / "toy-batches.tar.gz").exists()
    assert not (tf / "toy-batches.tar.gz").exists() and not (tf / "toy-batches").exists()
    assert (tf / "unrelated.npz").read_bytes() == b"keep me"
