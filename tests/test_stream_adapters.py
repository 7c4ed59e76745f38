"""The adapters over ``as_completed``: a real torch ``DataLoader`` (0 and 2 workers) and the
tf.data generator's contract (TensorFlow is not installed in the tests: the generator is
what ``tf.data.Dataset.from_generator`` calls, so its contract is tested directly)."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading

import pytest

import prefetch

KiB = 1 << 10


def make_shard(index: int, samples: int = 3) -> bytes:
    """A WebDataset-style tar: ``s<index>-<k>.txt`` and ``.cls`` per sample."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for k in range(samples):
            for ext, data in (("txt", f"shard {index} sample {k}".encode() * 200), ("cls", str(k).encode())):
                info = tarfile.TarInfo(f"s{index}-{k}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def put_tars(origin, count: int) -> tuple[list[dict], list[str]]:
    names = [f"shard-{i:02d}.tar" for i in range(count)]
    entries = []
    for i, name in enumerate(names):
        data = make_shard(i)
        origin.put(name, data)
        entries.append({"url": origin.url_for(name), "sha256": hashlib.sha256(data).hexdigest()})
    return entries, names


@pytest.fixture
def unix_sockets():
    """torch's DataLoader workers hand tensors over by passing fds on a Unix socket: allow those
    (still no network beyond loopback)."""
    from pytest_socket import socket_allow_hosts

    socket_allow_hosts(["127.0.0.1", "::1", "localhost"], allow_unix_socket=True)


def gets(origin, name: str) -> int:
    return len(origin.data_requests(name))


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_dataloader_of_paths(origin, home, tmp_path, workers, unix_sockets):
    from torch.utils.data import DataLoader

    entries, names = put_tars(origin, 4)
    origin.total_rate = 256 * KiB
    out = tmp_path / "out"
    urls = [e["url"] + "#sha256=" + e["sha256"] for e in entries]
    dataset = prefetch.torch_dataset(urls, output_dir=str(out), connections=1, progress=False)
    got = list(DataLoader(dataset, batch_size=None, num_workers=workers))
    if workers == 0:
        assert got == [str(out / n) for n in names]  # order given, as placed
    else:  # worker k took names k, k+2: the DataLoader alternates between workers
        assert got == [str(out / n) for n in (names[0], names[1], names[2], names[3])]
    assert all(gets(origin, n) == 1 for n in names)  # each file fetched once, by one worker
    again = list(DataLoader(dataset, batch_size=None, num_workers=workers))  # a second epoch: all cached
    assert sorted(again) == sorted(got) and all(gets(origin, n) == 1 for n in names)


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_dataloader_of_tar_samples(origin, home, tmp_path, workers, unix_sockets):
    from torch.utils.data import DataLoader

    entries, names = put_tars(origin, 4)
    origin.total_rate = 512 * KiB
    urls = [e["url"] + "#sha256=" + e["sha256"] for e in entries]
    dataset = prefetch.torch_dataset(urls, samples=True, output_dir=str(tmp_path / "out"), connections=1,
                                     progress=False, transform=lambda s: (s["__key__"], int(s["cls"])))
    loader = DataLoader(dataset, batch_size=3, num_workers=workers)
    batches = list(loader)
    keys = [k for batch_keys, _ in batches for k in batch_keys]
    assert sorted(keys) == sorted(f"s{i}-{k}" for i in range(4) for k in range(3))
    assert all(len(batch_keys) == 3 for batch_keys, _ in batches)  # a shard's samples batch together
    assert all(gets(origin, n) == 1 for n in names)


def test_torch_is_imported_only_by_the_adapter():
    import subprocess
    import sys

    code = "import sys, prefetch; prefetch.tf_generator(['x']); print('torch' in sys.modules, 'tensorflow' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["False", "False"], proc.stderr


def test_tf_generator_contract(origin, home, tmp_path):
    entries, names = put_tars(origin, 3)
    origin.total_rate = 512 * KiB
    urls = [e["url"] + "#sha256=" + e["sha256"] for e in entries]
    out = tmp_path / "out"
    options = dict(output_dir=str(out), connections=1, progress=False)
    paths = prefetch.tf_generator(urls, **options)
    assert callable(paths)
    assert list(paths()) == [str(out / n) for n in names]  # str items: tf.TensorSpec((), tf.string)
    assert list(paths()) == [str(out / n) for n in names]  # called again (a new epoch): cached, no request
    assert all(gets(origin, n) == 1 for n in names)
    pairs = list(prefetch.tf_generator(urls, samples=True, keys=("txt", "cls"), **options)())
    assert len(pairs) == 9 and all(isinstance(a, bytes) and isinstance(b, bytes) for a, b in pairs)
    assert pairs[0] == (b"shard 0 sample 0" * 200, b"0")
    dicts = list(prefetch.tf_generator(urls[:1], samples=True, **options)())
    assert [d["__key__"] for d in dicts] == ["s0-0", "s0-1", "s0-2"]


def test_tf_generator_closed_early_stops_the_downloads(origin, home, tmp_path):
    entries, names = put_tars(origin, 1)
    big = [f"big-{i}.bin" for i in range(3)]
    for name in big:
        origin.put(name, b"\0" * (1 << 20))
    origin.total_rate = 256 * KiB
    urls = [entries[0]["url"]] + [origin.url_for(n) for n in big]
    iterator = prefetch.tf_generator(urls, output_dir=str(tmp_path / "out"), connections=1, progress=False)()
    next(iterator)
    iterator.close()  # what tf.data does with a generator it no longer needs
    assert not any(t.name == "prefetch-as-completed" and t.is_alive() for t in threading.enumerate())
    assert not (tmp_path / "out" / big[-1]).exists()
