"""Synthetic, tiny versions of every Keras dataset, and a user registry pointing at them.

A helper module for the tests (not a test file). Each file has the exact format the
Keras loaders read (``keras/src/datasets/*.py``), only with a handful of rows:

* ``.npz`` files hold plain numeric arrays, except imdb/reuters whose sequences are
  ragged ``dtype=object`` arrays of Python ``list``s of ``int`` (as the real files):
  Keras >= 3.15 reads those with a restricted unpickler that allows only
  ``numpy.ndarray``, ``numpy.dtype`` and ``multiarray._reconstruct``.
* cifar batches are pickles (protocol 4: protocol 5 would reference
  ``numpy._core.numeric._frombuffer``, which the restricted unpickler refuses) of dicts
  with bytes keys: ``b"data"`` uint8 ``(N, 3072)`` and ``b"labels"`` (cifar10) or
  ``b"fine_labels"``/``b"coarse_labels"`` (cifar100), Python lists of ints.
  ``keras.datasets.cifar10.load_data`` pre-allocates 50000 training rows and assigns
  each ``data_batch_i`` to a 10000-row slice, so a one-row batch (broadcast) is the
  smallest file that loads.
* fashion-mnist files are gzipped IDX files: labels after an 8-byte header, images
  after a 16-byte header.

``build_files()`` returns ``{file name at the origin: bytes}``;
``write_registry()`` writes a registry TOML with the built-in datasets' names, targets,
aliases, extraction dirs and hash algorithms, but URLs on a test server and hashes of
the synthetic bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import pickle
import struct
from pathlib import Path

import numpy as np

from tests.archives import tar_gz

# Rows in the synthetic data (keep files tiny: a few KB each).
TRAIN, TEST = 12, 5
CIFAR10_TEST = 4
CIFAR100_TRAIN, CIFAR100_TEST = 10, 4
IMDB_TRAIN, IMDB_TEST = 8, 6
REUTERS_ROWS = 10
BOSTON_ROWS = 20
CALIFORNIA_ROWS = 25

WORDS = ["the", "and", "a", "of", "to", "is", "in", "it", "movie", "film"]

# What load_data() returns for these files (Keras 3.15, default arguments).
EXPECTED_SHAPES: dict[str, tuple[tuple, tuple, tuple, tuple]] = {
    "mnist": ((TRAIN, 28, 28), (TRAIN,), (TEST, 28, 28), (TEST,)),
    "fashion_mnist": ((TRAIN, 28, 28), (TRAIN,), (TEST, 28, 28), (TEST,)),
    "cifar10": ((50000, 32, 32, 3), (50000, 1), (CIFAR10_TEST, 32, 32, 3), (CIFAR10_TEST, 1)),
    "cifar100": ((CIFAR100_TRAIN, 32, 32, 3), (CIFAR100_TRAIN, 1), (CIFAR100_TEST, 32, 32, 3), (CIFAR100_TEST, 1)),
    "imdb": ((IMDB_TRAIN,), (IMDB_TRAIN,), (IMDB_TEST,), (IMDB_TEST,)),
    "reuters": ((8,), (8,), (2,), (2,)),  # test_split=0.2 of 10 rows
    "boston_housing": ((16, 13), (16,), (4, 13), (4,)),  # test_split=0.2 of 20 rows
    "california_housing": ((20, 8), (20,), (5, 8), (5,)),  # test_split=0.2 of 25 rows
}

def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _ragged(rng: np.random.Generator, rows: int) -> np.ndarray:
    """An object array of Python lists of ints of different lengths (never 2-D)."""
    out = np.empty(rows, dtype=object)
    for i in range(rows):
        out[i] = [int(w) for w in rng.integers(1, len(WORDS) + 1, size=3 + i % 5)]
    return out


def _idx_labels(labels: np.ndarray) -> bytes:
    return gzip.compress(struct.pack(">II", 2049, len(labels)) + labels.astype(np.uint8).tobytes(), mtime=0)


def _idx_images(images: np.ndarray) -> bytes:
    n, rows, cols = images.shape
    return gzip.compress(struct.pack(">IIII", 2051, n, rows, cols) + images.astype(np.uint8).tobytes(), mtime=0)


def _cifar_batch(rng: np.random.Generator, rows: int, label_keys: dict[bytes, int], name: str) -> bytes:
    body = {
        b"batch_label": name.encode(),
        b"data": rng.integers(0, 256, size=(rows, 3072), dtype=np.uint8),
        b"filenames": [f"img_{i}.png".encode() for i in range(rows)],
    }
    for key, classes in label_keys.items():
        body[key] = [int(v) for v in rng.integers(0, classes, size=rows)]
    return pickle.dumps(body, protocol=4)


def _tar_gz(folder: str, members: dict[str, bytes]) -> bytes:
    return tar_gz(members, folder=folder)


def build_files(seed: int = 0) -> dict[str, bytes]:
    """Every file of every built-in dataset, by its origin file name."""
    rng = np.random.default_rng(seed)
    files: dict[str, bytes] = {}

    files["mnist.npz"] = _npz(
        x_train=rng.integers(0, 256, size=(TRAIN, 28, 28), dtype=np.uint8),
        y_train=rng.integers(0, 10, size=TRAIN, dtype=np.uint8),
        x_test=rng.integers(0, 256, size=(TEST, 28, 28), dtype=np.uint8),
        y_test=rng.integers(0, 10, size=TEST, dtype=np.uint8),
    )

    files["train-labels-idx1-ubyte.gz"] = _idx_labels(rng.integers(0, 10, size=TRAIN))
    files["train-images-idx3-ubyte.gz"] = _idx_images(rng.integers(0, 256, size=(TRAIN, 28, 28)))
    files["t10k-labels-idx1-ubyte.gz"] = _idx_labels(rng.integers(0, 10, size=TEST))
    files["t10k-images-idx3-ubyte.gz"] = _idx_images(rng.integers(0, 256, size=(TEST, 28, 28)))

    cifar10 = {
        "batches.meta": pickle.dumps({b"label_names": [b"airplane", b"automobile"], b"num_vis": 3072}, protocol=4),
        "readme.html": b"<html>synthetic cifar-10</html>\n",
        "test_batch": _cifar_batch(rng, CIFAR10_TEST, {b"labels": 10}, "test"),
    }
    for i in range(1, 6):
        cifar10[f"data_batch_{i}"] = _cifar_batch(rng, 1, {b"labels": 10}, f"training batch {i} of 5")
    files["cifar-10-python.tar.gz"] = _tar_gz("cifar-10-batches-py", dict(sorted(cifar10.items())))

    labels100 = {b"fine_labels": 100, b"coarse_labels": 20}
    cifar100 = {
        "meta": pickle.dumps({b"fine_label_names": [b"apple"], b"coarse_label_names": [b"fruit"]}, protocol=4),
        "test": _cifar_batch(rng, CIFAR100_TEST, labels100, "testing batch"),
        "train": _cifar_batch(rng, CIFAR100_TRAIN, labels100, "training batch"),
    }
    files["cifar-100-python.tar.gz"] = _tar_gz("cifar-100-python", cifar100)

    files["imdb.npz"] = _npz(
        x_train=_ragged(rng, IMDB_TRAIN),
        y_train=rng.integers(0, 2, size=IMDB_TRAIN),
        x_test=_ragged(rng, IMDB_TEST),
        y_test=rng.integers(0, 2, size=IMDB_TEST),
    )
    word_index = {w: i + 1 for i, w in enumerate(WORDS)}
    files["imdb_word_index.json"] = json.dumps(word_index).encode()

    files["reuters.npz"] = _npz(x=_ragged(rng, REUTERS_ROWS), y=rng.integers(0, 46, size=REUTERS_ROWS))
    files["reuters_word_index.json"] = json.dumps({w: i + 1 for i, w in enumerate(reversed(WORDS))}).encode()

    files["boston_housing.npz"] = _npz(x=rng.random((BOSTON_ROWS, 13)), y=rng.random(BOSTON_ROWS) * 50)
    files["california_housing.npz"] = _npz(
        x=rng.random((CALIFORNIA_ROWS, 8)), y=rng.random(CALIFORNIA_ROWS) * 500000
    )
    return files


def serve_files(origin, files: dict[str, bytes]) -> None:
    """Put every file on ``origin`` (an ``tests.origin.OriginServer``), flat."""
    for name, data in files.items():
        origin.put(name, data)


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def _toml_list(values) -> str:
    return "[" + ", ".join(_toml_string(v) for v in values) + "]"


def registry_text(base_url: str, files: dict[str, bytes], *, names: list[str] | None = None) -> str:
    """A registry TOML mirroring the built-in one, with URLs under ``base_url``.

    Targets, aliases, extraction dirs and hash algorithms are taken from the built-in
    registry so that a download lands exactly where the real dataset would; hashes
    are those of ``files``.
    """
    from prefetch.cache.registry import load_registry

    builtin = load_registry()
    base = base_url if base_url.endswith("/") else base_url + "/"
    lines = ["# Synthetic Keras datasets for the tests (generated by tests/datasets_synth.py)."]
    for name, spec in builtin.datasets.items():
        if names is not None and name not in names:
            continue
        lines += ["", f"[{name}]", f"description = {_toml_string('synthetic ' + name)}"]
        for f in spec.files:
            data = files[f.name]
            lines += [
                f"[[{name}.files]]",
                f"name = {_toml_string(f.name)}",
                f"url = {_toml_string(base + f.name)}",
                f"target = {_toml_string(f.target)}",
            ]
            if f.expected is not None:
                digest = hashlib.new(f.expected.algorithm, data).hexdigest()
                lines.append(f"{f.expected.algorithm} = {_toml_string(digest)}")
            if f.also:
                lines.append(f"also = {_toml_list(f.also)}")
            if f.extract:
                lines.append(f"extract = {_toml_list(f.extract)}")
    return "\n".join(lines) + "\n"


def write_registry(path: Path, base_url: str, files: dict[str, bytes], *, names: list[str] | None = None) -> Path:
    """Write ``registry_text(...)`` to ``path``; return ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(registry_text(base_url, files, names=names), encoding="utf-8")
    return path

