"""A file Keras and torchvision share (CIFAR-10's archive, Fashion-MNIST's four .gz) is
downloaded once and placed in both layouts, in both orders: hard-linked on one filesystem,
copied (and checked) across two. The real Keras and torchvision readers then load it offline.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests import torchvision_synth as synth

KERAS_LOADER = textwrap.dedent(
    """
    import json, socket, sys
    def no_network(*a, **k):
        raise AssertionError(f"network use: {a!r}")
    socket.socket.connect = no_network
    socket.create_connection = no_network
    import keras.src.utils.file_utils as file_utils
    def no_download(url, *args, **kwargs):
        raise AssertionError(f"Keras tried to download {url}")
    file_utils.validate_file = lambda *args, **kwargs: True  # synthetic files: Keras's built-in hashes differ
    file_utils.urlretrieve = no_download
    from keras import datasets
    out = {}
    for name in sys.argv[1:]:
        (x_train, y_train), (x_test, y_test) = getattr(datasets, name).load_data()
        out[name] = [list(x_train.shape), list(x_test.shape)]
    print(json.dumps(out))
    """
)


def _keras_entries(archive: bytes, fashion: dict[str, bytes]) -> str:
    """Keras's cifar10 and fashion_mnist as the built-in registry lays them out, on a closed port,
    checked by sha256 (torchvision's tables use md5: the shared file is checked by both)."""
    text = ('\n[cifar10]\ndescription = "synthetic cifar10"\n[[cifar10.files]]\nname = "cifar-10-python.tar.gz"\n'
            f'url = "{synth.CLOSED}cifar-10-python.tar.gz"\nsha256 = "{hashlib.sha256(archive).hexdigest()}"\n'
            'target = "cifar-10-batches-py.tar.gz"\nalso = ["cifar-10-batches-py-target_archive"]\n'
            'extract = [".", "cifar-10-batches-py-target"]\n'
            '\n[fashion_mnist]\ndescription = "synthetic fashion_mnist"\n')
    for name, data in fashion.items():
        text += (f'[[fashion_mnist.files]]\nname = "{name}"\nurl = "{synth.CLOSED}{name}"\n'
                 f'sha256 = "{hashlib.sha256(data).hexdigest()}"\ntarget = "fashion-mnist/{name}"\n')
    return text


@pytest.fixture
def shared_files(nginx_origin, tmp_path):
    archive, fashion = synth.cifar10_archive(), synth.mnist_files(7)
    synth.write_files(nginx_origin.root, {"cifar-10-python.tar.gz": archive, **fashion})
    registry = tmp_path / "both.toml"
    registry.write_text(synth.registry_text({"CIFAR10": {"cifar-10-python.tar.gz": archive},
                                             "FashionMNIST": fashion},
                                            layout={**synth.LAYOUT, "FashionMNIST": {
                                                "dir": "FashionMNIST/raw", "decompress": True,
                                                "keras": "fashion_mnist"}})
                        + _keras_entries(archive, fashion))
    return registry, archive, fashion


def _requests(nginx) -> int:
    return len(nginx.timings()) if nginx.timing_log.exists() else 0


def _keras_load(keras_home: Path, tmp_path: Path, *names: str) -> dict:
    script = tmp_path / "load_keras.py"
    script.write_text(KERAS_LOADER)
    env = dict(os.environ, KERAS_HOME=str(keras_home), KERAS_BACKEND="numpy")
    proc = subprocess.run([sys.executable, str(script), *names], capture_output=True, text=True, env=env,
                          timeout=280, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _torchvision_load(root: Path, md5s: dict, tmp_path: Path) -> dict:
    script = tmp_path / "load_torchvision.py"
    script.write_text(synth.LOADER)
    proc = subprocess.run([sys.executable, str(script), str(root), json.dumps(md5s)], capture_output=True,
                          text=True, timeout=280, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_torchvision_first_then_keras_links_the_same_files_and_keras_loads_them(
        nginx_origin, shared_files, home, tmp_path, cli):
    registry, archive, fashion = shared_files
    root = tmp_path / "data"
    got = cli("get", "torchvision:CIFAR10", "torchvision:FashionMNIST", "--root", str(root),
              "--registry", str(registry), "--mirror", nginx_origin.url)
    assert got.returncode == 0, got.stderr
    requests = _requests(nginx_origin)
    assert requests == 5

    # Keras's own names: its origin is a closed port, no mirror: only the torchvision files can serve.
    keras = cli("get", "cifar10", "fashion_mnist", "--registry", str(registry))
    assert keras.returncode == 0, keras.stdout + keras.stderr
    assert _requests(nginx_origin) == requests  # nothing downloaded again
    datasets = home / ".keras" / "datasets"
    pairs = [(root / "cifar-10-python.tar.gz", datasets / "cifar-10-batches-py.tar.gz"),
             (root / "cifar-10-python.tar.gz", datasets / "cifar-10-batches-py-target_archive")]
    pairs += [(root / "FashionMNIST" / "raw" / n, datasets / "fashion-mnist" / n) for n in fashion]
    for tv, k in pairs:
        assert os.stat(tv).st_ino == os.stat(k).st_ino, k  # one copy on disk, two names
    out = _keras_load(home / ".keras", tmp_path, "cifar10", "fashion_mnist")
    assert out["fashion_mnist"] == [[synth.TRAIN, 28, 28], [synth.TEST, 28, 28]]
    assert out["cifar10"][1][0] == synth.TEST
    # torchvision still finds its own files
    md5s = {"CIFAR10": {"cifar-10-python.tar.gz": synth.md5(archive),
                        **{k: synth.md5(v) for k, v in synth.cifar10_members().items()}},
            "FashionMNIST": {n: synth.md5(d) for n, d in fashion.items()}}
    assert _torchvision_load(root, md5s, tmp_path)["FashionMNIST/False/False"][0] == synth.TEST


def test_keras_first_then_torchvision_on_another_filesystem_is_copied_and_checked(
        nginx_origin, shared_files, home, tmp_path, cli):
    registry, archive, fashion = shared_files
    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on another filesystem than the test's tmp dir")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        root = Path(shm) / "data"
        keras = cli("get", "cifar10", "--registry", str(registry), "--mirror", nginx_origin.url)
        assert keras.returncode == 0, keras.stderr
        requests = _requests(nginx_origin)
        got = cli("get", "torchvision:CIFAR10", "--root", str(root), "--registry", str(registry))  # origin closed
        assert got.returncode == 0, got.stdout + got.stderr
        assert "copied (another filesystem)" in got.stdout + got.stderr
        assert _requests(nginx_origin) == requests
        placed, keras_copy = root / "cifar-10-python.tar.gz", home / ".keras" / "datasets" / "cifar-10-batches-py.tar.gz"
        assert os.stat(placed).st_dev != os.stat(keras_copy).st_dev
        assert placed.read_bytes() == archive
        md5s = {"CIFAR10": {"cifar-10-python.tar.gz": synth.md5(archive),
                            **{k: synth.md5(v) for k, v in synth.cifar10_members().items()}}}
        assert _torchvision_load(root, md5s, tmp_path)["CIFAR10/False/False"][0] == synth.TEST

        # A Keras copy that no longer matches is never copied: torchvision's name is downloaded.
        (root / "cifar-10-python.tar.gz").unlink()
        keras_copy.unlink()
        (home / ".keras" / "datasets" / "cifar-10-batches-py-target_archive").unlink()
        keras_copy.write_bytes(archive[:-1] + bytes([archive[-1] ^ 1]))
        again = cli("get", "torchvision:CIFAR10", "--root", str(root), "--registry", str(registry),
                    "--mirror", nginx_origin.url)
        assert again.returncode == 0, again.stderr
        assert "copied" not in again.stdout + again.stderr
        assert placed.read_bytes() == archive and _requests(nginx_origin) == requests + 1


def test_another_users_file_at_a_noted_place_is_never_linked_into_the_keras_cache(
        nginx_origin, shared_files, home, cli):
    """Their inode in our cache would be theirs to rewrite after the check: downloaded instead."""
    from tests.test_shared_cache import as_other_user, plant_dirs

    registry, archive, _fashion = shared_files
    shared = Path(tempfile.mkdtemp(prefix="prefetch-shared-copy-", dir="/tmp"))
    try:
        os.chmod(shared, 0o1777)
        root = shared / "data"
        plant_dirs(root)  # their folder, world-writable
        got = cli("get", "torchvision:CIFAR10", "--root", str(root), "--registry", str(registry),
                  "--mirror", nginx_origin.url)
        assert got.returncode == 0, got.stderr
        placed = root / "cifar-10-python.tar.gz"

        def swap():  # the same bytes, but their file
            os.unlink(placed)
            placed.write_bytes(archive)
        as_other_user(swap)
        requests = _requests(nginx_origin)
        keras = cli("get", "cifar10", "--registry", str(registry), "--mirror", nginx_origin.url)
        assert keras.returncode == 0, keras.stderr
        keras_copy = home / ".keras" / "datasets" / "cifar-10-batches-py.tar.gz"
        assert keras_copy.read_bytes() == archive
        assert os.stat(keras_copy).st_uid == os.geteuid() and os.stat(keras_copy).st_ino != os.stat(placed).st_ino
        assert _requests(nginx_origin) == requests + 1  # downloaded, not taken from their file
    finally:
        import shutil

        shutil.rmtree(shared, ignore_errors=True)
