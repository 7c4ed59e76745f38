"""Synthetic torchvision datasets and checkpoints for the tests, and the loader that reads them.

The files have the real names and formats (idx .gz for the MNIST family, CIFAR's tar.gz of
Python 2 style pickles, a ``torch.save`` state dict); their hashes are their own, so a user
registry (``[torchvision.<Class>]``) tells prefetch the md5s, and the loader patches
torchvision's md5 tables, in its own process only, to the same values.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import struct
import textwrap
from pathlib import Path

import numpy as np

from tests.archives import tar_gz
from tests.datasets_synth import _idx_images, _idx_labels

CLOSED = "http://127.0.0.1:9/"  # the discard port: nothing listens, so any download attempt fails
MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
               "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
TRAIN, TEST = 6, 3
CIFAR_FILES = ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch")


class _Py2Pickler(pickle._Pickler):
    """Pickles ``bytes`` as Python 2 ``str``, as the real CIFAR files are: torchvision reads
    them with ``encoding="latin1"`` (str keys), Keras with ``encoding="bytes"``."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_py2_str(self, obj: bytes) -> None:
        n = len(obj)
        self.write((pickle.SHORT_BINSTRING + bytes([n]) if n < 256 else pickle.BINSTRING + struct.pack("<i", n)) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def _py2_pickle(obj) -> bytes:
    out = io.BytesIO()
    _Py2Pickler(out, protocol=2).dump(obj)
    return out.getvalue()


def mnist_files(seed: int) -> dict[str, bytes]:
    """The four idx .gz files of an MNIST-format dataset."""
    rng = np.random.default_rng(seed)
    return {
        "train-images-idx3-ubyte.gz": _idx_images(rng.integers(0, 256, size=(TRAIN, 28, 28))),
        "train-labels-idx1-ubyte.gz": _idx_labels(rng.integers(0, 10, size=TRAIN)),
        "t10k-images-idx3-ubyte.gz": _idx_images(rng.integers(0, 256, size=(TEST, 28, 28))),
        "t10k-labels-idx1-ubyte.gz": _idx_labels(rng.integers(0, 10, size=TEST)),
    }


def cifar10_members(seed: int = 3) -> dict[str, bytes]:
    """The members of cifar-10-batches-py/: five one-row training batches, a test batch, the meta file."""
    rng = np.random.default_rng(seed)
    members = {"batches.meta": _py2_pickle({b"label_names": [b"airplane", b"automobile"], b"num_vis": 3072})}
    for name in CIFAR_FILES:
        rows = TEST if name == "test_batch" else 1
        members[name] = _py2_pickle({b"batch_label": name.encode(),
                                     b"data": rng.integers(0, 256, size=(rows, 3072), dtype=np.uint8),
                                     b"labels": [int(v) for v in rng.integers(0, 10, size=rows)]})
    return members


def cifar10_archive(seed: int = 3) -> bytes:
    return tar_gz(cifar10_members(seed), folder="cifar-10-batches-py")


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def registry_text(classes: dict[str, dict[str, bytes]], *, layout: dict[str, dict]) -> str:
    """``[torchvision.<Class>]`` tables for ``classes`` (file name -> bytes), URLs on a closed port.

    ``layout[cls]`` gives ``dir``, ``extract`` and ``decompress`` as the built-in table has them.
    """
    lines = ["# synthetic torchvision datasets (tests/torchvision_synth.py)"]
    for cls, files in classes.items():
        lines += ["", f"[torchvision.{cls}]", f'description = "synthetic {cls}"']
        for name, data in files.items():
            lines += [f"[[torchvision.{cls}.files]]", f'name = "{name}"', f'urls = ["{CLOSED}{name}"]',
                      f'md5 = "{md5(data)}"']
            spec = layout.get(cls, {})
            if spec.get("dir"):
                lines.append(f'dir = "{spec["dir"]}"')
            if spec.get("extract") is not None:
                lines.append("extract = [" + ", ".join(f'"{e}"' for e in spec["extract"]) + "]")
            if spec.get("decompress"):
                lines.append("decompress = true")
            if spec.get("keras"):
                lines.append(f'keras = "{spec["keras"]}"')
    return "\n".join(lines) + "\n"


LAYOUT = {
    "MNIST": {"dir": "MNIST/raw", "decompress": True},
    "FashionMNIST": {"dir": "FashionMNIST/raw", "decompress": True},
    "CIFAR10": {"extract": [""], "keras": "cifar10"},
}


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)


def served_mnist(served: Path, registry: Path, seed: int) -> dict[str, bytes]:
    """MNIST's synthetic files (``mnist_files(seed)``) written to the origin's folder ``served``
    and a registry for them at ``registry`` (the ``LAYOUT`` above); the files."""
    files = mnist_files(seed)
    write_files(served, files)
    registry.write_text(registry_text({"MNIST": files}, layout=LAYOUT))
    return files


# The start of every loader script below and in tests/torchvision_synth_*.py: the process
# that runs the real torchvision may not open a socket (or resolve a name) at all.
NO_NETWORK = textwrap.dedent(
    """
    import json, socket, sys

    def no_network(*args, **kwargs):
        raise AssertionError(f"network use: {args!r}")

    socket.socket.connect = no_network
    socket.socket.connect_ex = no_network
    socket.create_connection = no_network
    socket.getaddrinfo = no_network
    """
)

# Runs in a subprocess: blocks every socket, makes torchvision's downloader fail loudly, and
# patches torchvision's md5 tables (in that process only) to the synthetic files' md5s.
LOADER = NO_NETWORK + textwrap.dedent(
    """

    import torch, torchvision
    import torchvision.datasets as D
    import torchvision.datasets.utils as U

    def no_download(*args, **kwargs):
        raise AssertionError(f"torchvision tried to download {args!r}")

    for name in ("download_url", "download_and_extract_archive", "_urlretrieve"):
        if hasattr(U, name):
            setattr(U, name, no_download)
    for module in ("mnist", "cifar"):
        mod = getattr(D, module)
        for name in ("download_url", "download_and_extract_archive"):
            if hasattr(mod, name):
                setattr(mod, name, no_download)

    md5s = json.loads(sys.argv[2])
    root = sys.argv[1]
    for cls in ("MNIST", "FashionMNIST"):
        if cls in md5s:
            getattr(D, cls).mirrors = ["http://127.0.0.1:9/"]
            getattr(D, cls).resources = [(n, md5s[cls][n]) for n, _ in getattr(D, cls).resources]
    if "CIFAR10" in md5s:
        c = md5s["CIFAR10"]
        D.CIFAR10.url = "http://127.0.0.1:9/cifar-10-python.tar.gz"
        D.CIFAR10.tgz_md5 = c["cifar-10-python.tar.gz"]
        D.CIFAR10.train_list = [[n, c[n]] for n, _ in D.CIFAR10.train_list]
        D.CIFAR10.test_list = [[n, c[n]] for n, _ in D.CIFAR10.test_list]
        D.CIFAR10.meta = dict(D.CIFAR10.meta, md5=c["batches.meta"])

    out = {}
    for cls in md5s:
        for download in (False, True):
            for train in (True, False):
                ds = getattr(D, cls)(root, train=train, download=download)
                data = ds.data if isinstance(ds.data, torch.Tensor) else torch.as_tensor(ds.data)
                out[f"{cls}/{download}/{train}"] = [len(ds), list(data.shape), int(data.to(torch.int64).sum())]
    print(json.dumps(out))
    """
)
