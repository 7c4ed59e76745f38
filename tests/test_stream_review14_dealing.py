"""How ``torch_dataset`` deals its names to DataLoader workers: an epoch is the same set of files
whatever ``num_workers`` is (real torch, nginx behind a 200 ms route)."""

from __future__ import annotations

import os

import pytest

import prefetch
from tests.test_stream_review14_loader import route, unix_sockets  # noqa: F401 - fixtures

KiB = 1 << 10


@pytest.mark.parametrize("as_urls", [False, True])
def test_a_name_given_twice_comes_once_per_epoch_with_workers_as_without(route, home, tmp_path,  # noqa: F811
                                                                         unix_sockets, as_urls):  # noqa: F811
    """``as_completed`` hands a file given twice over once; dealt round robin, the two copies
    went to two workers, and the epoch held it twice (and two processes raced for it)."""
    from torch.utils.data import DataLoader

    names = [f"part-{i}.npy" for i in range(3)]
    urls = [route.put(n, os.urandom(8 * KiB)) for n in names]
    given = [urls[0], urls[1], urls[2], urls[0]]  # part-0 again: worker 0 gets 0, 2; worker 1 gets 1, 0
    out = tmp_path / "out"
    if as_urls:
        entries = [{"url": u.split("#")[0], "sha256": u.split("=")[-1]} for u in given]
        dataset = prefetch.torch_dataset([], urls=entries, output_dir=str(out), progress=False)
    else:
        dataset = prefetch.torch_dataset(given, output_dir=str(out), progress=False)
    alone = list(DataLoader(dataset, batch_size=None, num_workers=0))
    assert sorted(alone) == [str(out / n) for n in names]
    dealt = list(DataLoader(dataset, batch_size=None, num_workers=2))
    assert sorted(dealt) == sorted(alone)  # each file once per epoch, as without workers
