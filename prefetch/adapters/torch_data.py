"""``StreamDataset``: a ``torch.utils.data.IterableDataset`` fed by ``prefetch.as_completed``.

Imports torch; only ``prefetch.adapters.torch_dataset`` loads this module.
"""

from __future__ import annotations

import torch.utils.data

from prefetch.adapters.samples import iter_tar_samples


class StreamDataset(torch.utils.data.IterableDataset):
    """Paths (or tar-shard samples) as their files are placed; see ``prefetch.adapters.torch_dataset``."""

    def __init__(self, names, *, samples: bool = False, transform=None, options: dict | None = None) -> None:
        super().__init__()
        self.names = [names] if isinstance(names, (str, bytes)) else [str(n) for n in names]
        self.samples = samples
        self.transform = transform
        self.options = dict(options or {})

    def shard(self) -> list[str]:
        """This worker's names: all of them in the main process, every W-th in DataLoader worker k of W."""
        info = torch.utils.data.get_worker_info()
        if info is None:
            return list(self.names)
        return self.names[info.id::info.num_workers]

    def __iter__(self):
        from prefetch.streaming import as_completed

        names = self.shard()
        if not names:
            return
        options = dict(self.options)
        if torch.utils.data.get_worker_info() is not None:
            options.setdefault("progress", False)  # one bar per worker process would garble the output
        with as_completed(names, **options) as paths:
            for path in paths:
                items = iter_tar_samples(path) if self.samples else (str(path),)
                for item in items:
                    yield self.transform(item) if self.transform is not None else item

    def __repr__(self) -> str:
        kind = "samples of" if self.samples else "paths of"
        return f"<prefetch StreamDataset: {kind} {len(self.names)} name(s)>"
