"""A training script for ``torchrun --nproc_per_node=2`` (tests/test_shard15_ddp.py): each rank joins a
gloo process group on 127.0.0.1, iterates ``prefetch.torch_dataset`` through a DataLoader for a
few epochs, and rank 0 writes what every rank was handed (gathered over the process group) to
the JSON file named by ``argv[2]``. ``argv[1]``: the JSON config (urls, out, by_rank, workers,
start, epochs, forget_env, take: leave each epoch after that many items,
bars: progress bars left to their default, persistent: one loader with persistent_workers)."""

from __future__ import annotations

import json
import os
import sys

import torch.distributed as dist
from torch.utils.data import DataLoader

import prefetch


def main() -> None:
    config = json.loads(open(sys.argv[1], encoding="utf-8").read())
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if config.get("forget_env"):  # as a launcher that sets no RANK / WORLD_SIZE (the process group only)
        for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
            os.environ.pop(var, None)
    options = {} if config.get("bars") else {"progress": False}  # bars: as the default has them
    dataset = prefetch.torch_dataset(config["urls"], output_dir=config["out"], by_rank=config["by_rank"],
                                     max_ahead=config.get("max_ahead"), headers={"X-Client": f"rank{rank}"},
                                     **options)
    epochs = []
    kept = None  # persistent: one loader, its workers kept from epoch to epoch
    if config.get("persistent"):
        kept = DataLoader(dataset, batch_size=None, num_workers=config["workers"], persistent_workers=True,
                          multiprocessing_context=config.get("start"))
    for _ in range(config.get("epochs", 1)):
        loader = kept
        if loader is None:  # (not `kept or ...`: a DataLoader of an IterableDataset has no len)
            loader = DataLoader(dataset, batch_size=None, num_workers=config["workers"],
                                multiprocessing_context=config.get("start") if config["workers"] else None)
        taken = []
        for path in loader:
            taken.append(os.path.basename(path))
            if len(taken) == config.get("take"):  # a loop left early (the loader's workers shut down)
                break
        epochs.append(taken)
        del loader
    del kept
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "world": world, "epochs": epochs, "repr": repr(dataset)})
    if rank == 0:
        with open(sys.argv[2], "w", encoding="utf-8") as f:
            json.dump(gathered, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
