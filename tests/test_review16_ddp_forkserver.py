"""``torch_dataset`` under DDP with DataLoader workers started by a fork server
(``multiprocessing_context="forkserver"``; Python 3.14 makes it Linux's default start method) and a
launcher that sets no ``RANK`` / ``WORLD_SIZE`` (``mp.spawn``: the process group only). A worker
takes the rank its rank's process pinned when it pickled the dataset only when that process is
its parent; a fork server's worker's parent is the fork server, so each worker looked the rank up
afresh, found no process group and no ``RANK``, took rank 0 of 1, and every rank read (and
downloaded) every shard: each sample world-size times an epoch. Now the process that started the
worker (``multiprocessing.parent_process()``) counts as its maker too. A real ``torchrun`` of 2
ranks (gloo on 127.0.0.1) against nginx, as tests/test_shard15_ddp.py."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.test_shard15_ddp import NAMES, SIZE, fetched, shards, torchrun  # noqa: F401 - shards: the fixture

pytest.importorskip("torch.distributed")


def test_forkserver_workers_read_only_their_ranks_share(shards, home, tmp_path):  # noqa: F811
    out = tmp_path / "out"
    ranks = torchrun(tmp_path, urls=shards.urls, out=str(out), by_rank=True, workers=2, start="forkserver",
                     epochs=1, max_ahead=1, forget_env=True)
    assert [r["world"] for r in ranks] == [2, 2]
    for r in ranks:
        assert Counter(r["epochs"][0]) == Counter(NAMES[r["rank"]::2]), (r["rank"], r["epochs"][0])
    got = fetched(shards)
    for r in (0, 1):  # (the server's side: each rank downloaded its own share only)
        assert got[f"rank{r}"] == Counter({n: SIZE for n in NAMES[r::2]}), (r, got[f"rank{r}"])
