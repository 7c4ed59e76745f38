"""``StreamDataset``: a ``torch.utils.data.IterableDataset`` fed by ``prefetch.as_completed``.

Imports torch; only ``prefetch.adapters.torch_dataset`` loads this module.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

import torch.utils.data

from prefetch.adapters.deal import deal_items, objects
from prefetch.adapters.samples import iter_tar_samples


class StreamDataset(torch.utils.data.IterableDataset):
    """Paths (or tar-shard samples) as their files are placed; see ``prefetch.adapters.torch_dataset``."""

    def __init__(self, names, *, samples: bool = False, transform=None, by_rank: bool = True,
                 options: dict | None = None) -> None:
        super().__init__()
        self.by_rank = by_rank
        # (rank, world size, pid) as the process that pickled this saw them (pid: that process's)
        self._pinned: tuple[int, int, int] | None = None
        if by_rank:
            rank_and_world()  # (a bad RANK / WORLD_SIZE: UsageError now, not in the first epoch's workers)
        # A name (or entry) given twice is one file, handed over once, as ``as_completed`` does: dealt
        # as two, its copies went to two workers and the epoch held it twice.
        self.names = _once([names] if isinstance(names, (str, bytes)) else [str(n) for n in names])
        self.samples = samples
        self.transform = transform
        self.options = dict(options or {})
        urls = self.options.pop("urls", None) or []
        self.urls = _once([urls] if isinstance(urls, (str, Mapping)) else list(urls))  # the -i entries, dealt as names are
        objects(self.names, self.urls)  # (two signings of one object that disagree: UsageError now)

    def shard(self) -> tuple[list[str], list]:
        """This process's names and URL entries: every N-th of them in rank r of N (``by_rank``, under
        DistributedDataParallel), and of those every W-th in DataLoader worker k of W."""
        names, urls = self.names, self.urls
        if self.by_rank:
            rank, world = self.rank_and_world()
            # (a rank with nothing would end its epoch at once: DDP waits for it for ever)
            names, urls = deal_items(names, urls, rank, world, lambda n: (
                f"torch_dataset: {n} name(s) for {world} ranks: names are dealt to "
                "the ranks whole (an hf:// repo or a dataset is one name); give at least one "
                "per rank (the shards' URLs), or by_rank=False for every rank to read them all"))
        info = torch.utils.data.get_worker_info()
        if info is not None:
            names, urls = deal_items(names, urls, info.id, info.num_workers)
        return names, urls

    def rank_and_world(self) -> tuple[int, int]:
        """(rank, world size): in a spawned (or fork server's) DataLoader worker, as its rank's
        process saw them when it pickled this; else from ``torch.distributed`` (a forked worker
        has its parent's), else ``RANK`` / ``WORLD_SIZE``. A copy unpickled anywhere else (another rank loading what rank
        0 saved) looks them up afresh."""
        if self._pinned is not None and self._pinned[2] in _makers():
            return self._pinned[0], self._pinned[1]
        return rank_and_world()

    def _rank_quietly(self) -> int:
        """This process's rank, 0 when there is none or ``RANK`` is not one (``by_rank=False`` reads it too)."""
        from prefetch.errors import UsageError

        try:
            return self.rank_and_world()[0]
        except UsageError:
            return 0

    def __getstate__(self) -> dict:
        # A DataLoader's spawned worker starts without the process group: it gets the rank as the
        # process that started it saw it (a launcher such as mp.spawn may set no RANK variable).
        state = dict(self.__dict__)
        if self.by_rank and _distributed() is not None:
            state["_pinned"] = (*rank_and_world(), os.getpid())
        return state

    def __iter__(self):
        from prefetch.streaming import as_completed

        names, urls = self.shard()
        options = dict(self.options)
        if not names and not urls:
            return  # fewer names than ranks or workers: nothing for this one
        if torch.utils.data.get_worker_info() is not None or self._rank_quietly() > 0:
            # one bar per worker process, or per rank (all writing to one terminal or cell), would
            # garble the output: rank 0's main process alone shows one by default
            options.setdefault("progress", False)
        if urls:
            options["urls"] = urls
        with as_completed(names, **options) as paths:
            left = _close_with_the_loader(paths)
            try:
                for path in paths:
                    items = iter_tar_samples(path) if self.samples else (str(path),)
                    for item in items:
                        yield self.transform(item) if self.transform is not None else item
            finally:
                left.set()

    def __repr__(self) -> str:
        kind = "samples of" if self.samples else "paths of"
        from prefetch.errors import UsageError

        split = ""
        if self.by_rank:
            try:
                rank, world = self.rank_and_world()
            except UsageError:  # (RANK / WORLD_SIZE changed since: iterating says so, a repr does not raise)
                rank, world = 0, 1
            split = f", rank {rank}'s share of {world}" if world > 1 else ""
        return f"<prefetch StreamDataset: {kind} {len(self.names)} name(s){split}>"


def _distributed():
    """``torch.distributed`` when it is initialized in this process, else None."""
    dist = getattr(torch, "distributed", None)
    try:
        return dist if dist is not None and dist.is_available() and dist.is_initialized() else None
    except Exception:  # noqa: BLE001 - a torch built without it, or half torn down
        return None


def rank_and_world(env=None) -> tuple[int, int]:
    """(rank, world size): from ``torch.distributed`` when a process group is initialized, else
    from ``RANK`` and ``WORLD_SIZE`` (as torchrun sets them), else (0, 1).

    Raises:
        UsageError: ``RANK`` / ``WORLD_SIZE`` that are not whole numbers with 0 <= rank < world size.
    """
    from prefetch.errors import UsageError

    dist = _distributed()
    if dist is not None:
        return int(dist.get_rank()), int(dist.get_world_size())
    env = os.environ if env is None else env
    rank, world = env.get("RANK", "").strip(), env.get("WORLD_SIZE", "").strip()
    if not rank and not world:
        return 0, 1
    try:
        r, w = int(rank or 0), int(world or 1)
    except ValueError:
        r, w = -1, 0
    if not 0 <= r < w:
        raise UsageError(f"RANK={rank!r} WORLD_SIZE={world!r}: not a rank of a world (whole numbers, "
                         "0 <= RANK < WORLD_SIZE); torch_dataset(..., by_rank=False) ignores them")
    return r, w


def _makers() -> tuple:
    """This process, its parent, and the process that started it (``multiprocessing``'s parent): a
    ``forkserver`` DataLoader worker's parent is the fork server, not the rank that pickled the
    dataset (with only the parent checked, each rank's workers of a launcher that sets no ``RANK``
    looked it up afresh, found rank 0 of 1, and every rank read every name)."""
    import multiprocessing

    started_by = multiprocessing.parent_process()
    return os.getpid(), os.getppid(), started_by.pid if started_by is not None else None


def _once(items: list) -> list:
    """``items`` without repeats (the first of each kept, in order; entries may be dicts)."""
    seen: set = set()
    kept: list = []
    for item in items:
        key = tuple(sorted((str(k), repr(v)) for k, v in item.items())) if isinstance(item, Mapping) else repr(item)
        if key not in seen:
            seen.add(key)
            kept.append(item)
    return kept


def _close_with_the_loader(paths) -> threading.Event:
    """In a DataLoader worker: close ``paths`` once the loader shuts its workers down, or the main
    process is gone. Returns the event that ends this watch (set it when the iteration ends).

    A worker only reads the loader's shutdown between two items; one waiting in ``next()`` for its
    next file to download heard nothing, and torch waited 5 s for it, then killed it (SIGTERM)
    mid-download. Closing the stream ends that ``next()`` within about a second, resumable, and
    the worker leaves by itself. The loader's shutdown is the ``multiprocessing`` Event torch passes
    to its worker loop (``done_event``): the only one among the worker process's arguments.
    Outside a worker, or if it cannot be found, nothing is watched.
    """
    import multiprocessing
    from multiprocessing.synchronize import Event

    left = threading.Event()
    if torch.utils.data.get_worker_info() is None:
        return left
    args = getattr(multiprocessing.current_process(), "_args", None) or ()
    done = [a for a in args if isinstance(a, Event)]
    parent = os.getppid()
    if len(done) != 1:
        return left

    def watch() -> None:
        while not left.wait(0.2):
            if done[0].is_set() or os.getppid() != parent:
                paths.close()
                return

    threading.Thread(target=watch, name="prefetch-loader-watch", daemon=True).start()
    return left
