"""Real Keras reads what prefetch placed, with no network: every keras.datasets loader.

prefetch downloads synthetic versions of every dataset from the local origin into a
temporary KERAS_HOME; then a fresh Python process (KERAS_HOME is read once, at
``import keras``) with ``KERAS_BACKEND=numpy`` calls each ``load_data()`` and
``get_word_index()``. Keras checks the real datasets' hashes, which synthetic data
cannot match, so ``validate_file`` is patched to accept; ``urlretrieve`` is patched to
raise, so any download attempt fails the test.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from tests import datasets_synth
from tests.conftest import run_cli

LOADER = textwrap.dedent(
    """
    import hashlib, json, sys
    import keras.src.utils.file_utils as file_utils

    def no_download(url, *args, **kwargs):
        raise AssertionError(f"Keras tried to download {url}")

    file_utils.validate_file = lambda *args, **kwargs: True
    file_utils.urlretrieve = no_download

    import keras
    from keras import datasets
    from keras.src.datasets.cifar import load_batch

    out = {"keras": keras.__version__, "backend": keras.backend.backend(), "shapes": {}, "sha256": {}}
    for name in ["mnist", "fashion_mnist", "cifar10", "cifar100", "imdb", "reuters",
                 "boston_housing", "california_housing"]:
        (x_train, y_train), (x_test, y_test) = getattr(datasets, name).load_data()
        out["shapes"][name] = [list(a.shape) for a in (x_train, y_train, x_test, y_test)]
        if name in ("mnist", "fashion_mnist"):
            out["sha256"][name] = hashlib.sha256(x_train.tobytes() + y_test.tobytes()).hexdigest()
    out["imdb_word_index"] = datasets.imdb.get_word_index()
    out["reuters_word_index"] = datasets.reuters.get_word_index()
    out["cifar100_coarse"] = list(datasets.cifar100.load_data(label_mode="coarse")[0][1].shape)

    # Keras 2 / tf-keras / Keras 3.0-3.5 read the legacy folder with the same batch format.
    root = sys.argv[1]
    legacy = {}
    for rel, key in [("cifar-10-batches-py/data_batch_1", "labels"), ("cifar-10-batches-py/test_batch", "labels"),
                     ("cifar-100-python/train", "fine_labels"), ("cifar-100-python/test", "coarse_labels")]:
        data, labels = load_batch(f"{root}/datasets/{rel}", label_key=key)
        legacy[rel] = [list(data.shape), len(labels)]
    out["legacy"] = legacy
    print(json.dumps(out))
    """
)

NAMES = ["mnist", "fashion_mnist", "cifar10", "cifar100", "imdb", "reuters", "boston_housing", "california_housing"]


def test_keras_load_data_reads_every_prefetched_dataset_offline(origin, home, tmp_path):
    files = datasets_synth.build_files()
    datasets_synth.serve_files(origin, files)
    registry = datasets_synth.write_registry(tmp_path / "synth.toml", origin.url, files)
    keras_home = tmp_path / "keras-home"
    env = os.environ.copy()
    env["KERAS_HOME"] = str(keras_home)
    env["KERAS_BACKEND"] = "numpy"

    got = run_cli("get", *NAMES, "--registry", str(registry), env=env)
    assert got.returncode == 0, got.stderr

    origin.stop()  # from here on, nothing may be downloaded
    script = tmp_path / "load_all.py"
    script.write_text(LOADER)
    proc = subprocess.run(
        [sys.executable, str(script), str(keras_home)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])

    assert out["backend"] == "numpy"
    for name in NAMES:
        assert out["shapes"][name] == [list(s) for s in datasets_synth.EXPECTED_SHAPES[name]], name
    # The bytes Keras returned are the ones prefetch placed.
    with np.load(io.BytesIO(files["mnist.npz"])) as mnist:
        expected = mnist["x_train"].tobytes() + mnist["y_test"].tobytes()
    assert out["sha256"]["mnist"] == hashlib.sha256(expected).hexdigest()
    assert out["imdb_word_index"] == json.loads(files["imdb_word_index.json"])
    assert out["reuters_word_index"] == json.loads(files["reuters_word_index.json"])
    assert out["cifar100_coarse"] == [datasets_synth.CIFAR100_TRAIN, 1]

    # Keras 2 / tf-keras / Keras 3.0-3.5 layout: archives kept and extracted folders complete.
    datasets = keras_home / "datasets"
    assert (datasets / "cifar-10-batches-py.tar.gz").read_bytes() == files["cifar-10-python.tar.gz"]
    assert (datasets / "cifar-100-python.tar.gz").read_bytes() == files["cifar-100-python.tar.gz"]
    assert out["legacy"] == {
        "cifar-10-batches-py/data_batch_1": [[1, 3, 32, 32], 1],
        "cifar-10-batches-py/test_batch": [[datasets_synth.CIFAR10_TEST, 3, 32, 32], datasets_synth.CIFAR10_TEST],
        "cifar-100-python/train": [[datasets_synth.CIFAR100_TRAIN, 3, 32, 32], datasets_synth.CIFAR100_TRAIN],
        "cifar-100-python/test": [[datasets_synth.CIFAR100_TEST, 3, 32, 32], datasets_synth.CIFAR100_TEST],
    }
    # Keras did not write into any other cache (it read KERAS_HOME).
    assert not (home / ".keras").exists()
