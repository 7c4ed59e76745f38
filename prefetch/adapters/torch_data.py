"""``StreamDataset``: a ``torch.utils.data.IterableDataset`` fed by ``prefetch.as_completed``.

Imports torch; only ``prefetch.adapters.torch_dataset`` loads this module.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

import torch.utils.data

from prefetch.adapters.samples import iter_tar_samples


class StreamDataset(torch.utils.data.IterableDataset):
    """Paths (or tar-shard samples) as their files are placed; see ``prefetch.adapters.torch_dataset``."""

    def __init__(self, names, *, samples: bool = False, transform=None, options: dict | None = None) -> None:
        super().__init__()
        # A name (or entry) given twice is one file, handed over once, as ``as_completed`` does: dealt
        # as two, its copies went to two workers and the epoch held it twice.
        self.names = _once([names] if isinstance(names, (str, bytes)) else [str(n) for n in names])
        self.samples = samples
        self.transform = transform
        self.options = dict(options or {})
        urls = self.options.pop("urls", None) or []
        self.urls = _once([urls] if isinstance(urls, (str, Mapping)) else list(urls))  # the -i entries, dealt as names are

    def shard(self) -> tuple[list[str], list]:
        """This worker's names and URL entries: all of them in the main process, every W-th in worker k of W."""
        info = torch.utils.data.get_worker_info()
        if info is None:
            return list(self.names), list(self.urls)
        items = [*((True, n) for n in self.names), *((False, u) for u in self.urls)]
        mine = items[info.id::info.num_workers]
        return [n for is_name, n in mine if is_name], [u for is_name, u in mine if not is_name]

    def __iter__(self):
        from prefetch.streaming import as_completed

        names, urls = self.shard()
        options = dict(self.options)
        if torch.utils.data.get_worker_info() is not None:
            if not names and not urls:
                return  # fewer names than workers: nothing for this one
            options.setdefault("progress", False)  # one bar per worker process would garble the output
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
        return f"<prefetch StreamDataset: {kind} {len(self.names)} name(s)>"


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
