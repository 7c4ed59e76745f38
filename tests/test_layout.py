"""Layout: every dataset lands at the exact paths each Keras version reads (DESIGN.md §4).

Synthetic datasets (tests/datasets_synth.py) are served by the local origin; a user
registry with the built-in names, targets and extraction dirs points at it.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from prefetch.cache.keras import KerasInstall, KerasLayout, detect_keras
from prefetch.cache.layout import keras_root, part_path, state_path
from tests import datasets_synth
from tests.conftest import run_cli

CIFAR10_MEMBERS = ["batches.meta", "data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4",
                   "data_batch_5", "readme.html", "test_batch"]
CIFAR100_MEMBERS = ["meta", "test", "train"]
FASHION = ["train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz",
           "t10k-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"]

# Every file under <keras root>/datasets/ after `prefetch get NAME`, from DESIGN.md §4:
# cifar archives under the Keras 2 / 3.0-3.5 name and the Keras >= 3.6 name, each
# extracted where that version looks.
EXPECTED_FILES: dict[str, set[str]] = {
    "mnist": {"mnist.npz"},
    "fashion_mnist": {f"fashion-mnist/{name}" for name in FASHION},
    "cifar10": {
        "cifar-10-batches-py.tar.gz",  # legacy archive
        *(f"cifar-10-batches-py/{m}" for m in CIFAR10_MEMBERS),  # legacy extraction
        "cifar-10-batches-py-target_archive",  # Keras >= 3.6 archive
        *(f"cifar-10-batches-py-target/cifar-10-batches-py/{m}" for m in CIFAR10_MEMBERS),
    },
    "cifar100": {
        "cifar-100-python.tar.gz",
        *(f"cifar-100-python/{m}" for m in CIFAR100_MEMBERS),
        "cifar-100-python-target_archive",
        *(f"cifar-100-python-target/cifar-100-python/{m}" for m in CIFAR100_MEMBERS),
    },
    "imdb": {"imdb.npz", "imdb_word_index.json"},
    "reuters": {"reuters.npz", "reuters_word_index.json"},
    "boston_housing": {"boston_housing.npz"},
    "california_housing": {"california_housing.npz"},
}
ORIGIN_NAME = {  # the file each target comes from
    "cifar-10-batches-py.tar.gz": "cifar-10-python.tar.gz",
    "cifar-10-batches-py-target_archive": "cifar-10-python.tar.gz",
    "cifar-100-python.tar.gz": "cifar-100-python.tar.gz",
    "cifar-100-python-target_archive": "cifar-100-python.tar.gz",
}


@pytest.fixture(scope="module")
def synth_files() -> dict[str, bytes]:
    return datasets_synth.build_files()


@pytest.fixture
def served(origin, synth_files, tmp_path):
    """(origin, registry path) with every synthetic file on the origin."""
    datasets_synth.serve_files(origin, synth_files)
    return origin, datasets_synth.write_registry(tmp_path / "synth.toml", origin.url, synth_files)


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def tar_members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def assert_dataset_tree(datasets: Path, names, files: dict[str, bytes]) -> None:
    """Exactly the expected files, with the right bytes (archives and their contents)."""
    expected = set().union(*(EXPECTED_FILES[n] for n in names))
    assert files_under(datasets) == expected
    for rel in expected:
        path = datasets / rel
        source = ORIGIN_NAME.get(rel, Path(rel).name)
        if source in files:
            assert path.read_bytes() == files[source], rel
    for archive in ("cifar-10-python.tar.gz", "cifar-100-python.tar.gz"):
        if not any(ORIGIN_NAME.get(rel) == archive for rel in expected):
            continue
        for member, data in tar_members(files[archive]).items():
            assert (datasets / member).read_bytes() == data  # legacy: <datasets>/<folder>/...
            target_dir = member.split("/")[0] + "-target"
            assert (datasets / target_dir / member).read_bytes() == data  # Keras >= 3.6


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_each_dataset_lands_at_the_exact_keras_paths(served, synth_files, home, name):
    origin, registry = served

    proc = run_cli("get", name, "--registry", str(registry))

    assert proc.returncode == 0, proc.stderr
    assert_dataset_tree(home / ".keras" / "datasets", [name], synth_files)


def test_cifar_archive_names_share_bytes(served, home):
    origin, registry = served

    proc = run_cli("get", "cifar10", "--registry", str(registry))

    assert proc.returncode == 0, proc.stderr
    datasets = home / ".keras" / "datasets"
    legacy, target = datasets / "cifar-10-batches-py.tar.gz", datasets / "cifar-10-batches-py-target_archive"
    assert legacy.read_bytes() == target.read_bytes()
    # Downloaded once; on one filesystem the second name is a hard link (no second copy
    # of a 160 MB archive).
    assert len(origin.data_requests("cifar-10-python.tar.gz")) == 1
    assert {r.name for r in origin.requests} == {"cifar-10-python.tar.gz"}
    assert os.path.samefile(legacy, target)


def test_mirror_flat_base_replaces_the_origin_urls(origin, silent_origin, synth_files, home, tmp_path):
    """--mirror URL: files come from <base>/<name>; the registry's URLs are never contacted.

    The registry points at a server that accepts connections and never answers, so
    any contact would show up in its connection count (and stall the download).
    """
    datasets_synth.serve_files(origin, synth_files)
    registry = datasets_synth.write_registry(tmp_path / "synth.toml", silent_origin.url, synth_files)
    names = sorted(EXPECTED_FILES)

    proc = run_cli("get", *names, "--mirror", origin.url, "--registry", str(registry))

    assert proc.returncode == 0, proc.stderr
    assert_dataset_tree(home / ".keras" / "datasets", names, synth_files)
    assert silent_origin.connections == 0
    assert {r.name for r in origin.requests} == set(synth_files)


def test_mirror_base_with_a_path_prefix(origin, silent_origin, synth_files, home, tmp_path):
    for name, data in synth_files.items():
        origin.put(f"datasets/keras/{name}", data)
    registry = datasets_synth.write_registry(tmp_path / "synth.toml", silent_origin.url, synth_files)

    proc = run_cli("get", "mnist", "imdb", "--mirror", origin.url + "datasets/keras", "--registry", str(registry))

    assert proc.returncode == 0, proc.stderr
    assert_dataset_tree(home / ".keras" / "datasets", ["mnist", "imdb"], synth_files)
    assert silent_origin.connections == 0


def test_keras_home_is_honoured(served, synth_files, home, tmp_path):
    origin, registry = served
    env = os.environ.copy()
    env["KERAS_HOME"] = str(tmp_path / "elsewhere")

    proc = run_cli("get", "mnist", "cifar100", "--registry", str(registry), env=env)

    assert proc.returncode == 0, proc.stderr
    assert_dataset_tree(tmp_path / "elsewhere" / "datasets", ["mnist", "cifar100"], synth_files)
    assert not (home / ".keras").exists()


def test_cache_dir_beats_keras_home(served, synth_files, home, tmp_path):
    origin, registry = served

    proc = run_cli("get", "mnist", "fashion_mnist", "--registry", str(registry), "--cache-dir", str(tmp_path / "cache"))

    assert proc.returncode == 0, proc.stderr
    assert_dataset_tree(tmp_path / "cache" / "datasets", ["mnist", "fashion_mnist"], synth_files)
    assert not (home / ".keras").exists()  # KERAS_HOME (set by the fixture) untouched


def test_home_dot_keras_when_keras_home_is_unset(served, synth_files, home):
    origin, registry = served
    env = os.environ.copy()
    del env["KERAS_HOME"]

    proc = run_cli("get", "boston_housing", "--registry", str(registry), env=env)

    assert proc.returncode == 0, proc.stderr
    assert_dataset_tree(home / ".keras" / "datasets", ["boston_housing"], synth_files)


# --------------------------------------------------------------------------- pure functions


def test_keras_root_order(tmp_path):
    home = str(tmp_path)
    assert keras_root(cache_dir=tmp_path / "c", env={"KERAS_HOME": "/k", "HOME": home}) == tmp_path / "c"
    assert keras_root(env={"KERAS_HOME": "/k", "HOME": home}) == Path("/k")
    assert keras_root(env={"HOME": home}) == tmp_path / ".keras"
    assert keras_root(env={"KERAS_HOME": "~/kh", "HOME": home}) == Path(os.path.expanduser("~/kh"))


def test_keras_root_falls_back_to_tmp_when_home_is_not_writable(tmp_path):
    # A home that does not exist is not writable (root can write anywhere else).
    assert keras_root(env={"HOME": str(tmp_path / "missing")}) == Path("/tmp/.keras")


def test_part_and_state_sit_beside_the_final_path(tmp_path):
    final = tmp_path / "datasets" / "mnist.npz"
    assert part_path(final) == tmp_path / "datasets" / "mnist.npz.part"
    assert state_path(final) == tmp_path / "datasets" / "mnist.npz.part.json"


@pytest.mark.parametrize(
    ("keras", "tf_keras", "layouts"),
    [
        ("3.15.1", None, [KerasLayout.TARGET]),
        ("3.6.0", None, [KerasLayout.TARGET]),
        ("3.5.0", None, [KerasLayout.LEGACY]),
        ("3.0.0rc1", None, [KerasLayout.LEGACY]),
        ("2.15.0", None, [KerasLayout.LEGACY]),
        (None, "2.15.1", [KerasLayout.LEGACY]),
        ("3.15.1", "2.15.1", [KerasLayout.LEGACY, KerasLayout.TARGET]),
        (None, None, [KerasLayout.NONE]),
    ],
)
def test_layouts_by_installed_version(keras, tf_keras, layouts):
    assert KerasInstall(keras=keras, tf_keras=tf_keras).layouts == layouts


def test_detect_keras_reads_the_installed_version():
    from importlib import metadata

    found = detect_keras()
    assert found.keras == metadata.version("keras")
    assert KerasLayout.TARGET in found.layouts  # the test environment has Keras >= 3.6
