"""Thin adapters from ``prefetch.as_completed`` to data pipelines: PyTorch and tf.data.

    torch_data.py  ``StreamDataset``: a ``torch.utils.data.IterableDataset`` of paths, or of
                   the samples of tar shards (imports torch: only loaded by ``torch_dataset``)
    samples.py     the samples of a tar shard, WebDataset style (no torch, no TensorFlow)
    deal.py        names and ``urls=`` entries dealt round robin to ranks, workers, pipelines
                   (one object per item: the signings of one link together)

Neither library is a dependency of prefetch: torch is imported only when
``torch_dataset`` is called, and ``tf_generator`` needs no TensorFlow at all (it
returns the callable ``tf.data.Dataset.from_generator`` wants). May import every
layer below it, up to the API (``prefetch.streaming``); never the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping

from prefetch.adapters.samples import iter_tar_samples


def torch_dataset(names, *, samples: bool = False, transform=None, by_rank: bool = True, **options):
    """A ``torch.utils.data.IterableDataset`` over ``as_completed(names, **options)``.

    Each item is a path (``str``), or with ``samples=True`` each sample of each tar
    shard: a dict ``{"__key__": ..., "__shard__": path, "<ext>": bytes, ...}``
    (WebDataset's convention: members ``key.ext`` with the same key form one sample).
    ``transform`` is applied to each item. Every iteration (epoch) runs its own
    ``as_completed``: files already in place come at once, missing ones download.

    With ``DataLoader(num_workers=W)`` the names are dealt to the workers round robin
    (worker ``k`` gets names ``k, k+W, ...``): each file is downloaded once, by the
    worker that yields it, and each worker downloads while it trains. With fewer
    names than workers some workers have nothing to do. A name given twice is one file,
    yielded once per epoch, as ``as_completed`` does; so is one object under two signings
    (``net/urls.link_key``: a new signature or token), dealt as one item with the others as its
    second sources.

    Under DistributedDataParallel (``torchrun``), with ``by_rank=True`` (the default), the
    names are first dealt to the ranks the same way (rank ``r`` of ``N`` gets names ``r, r+N,
    ...``, then its workers share those): every name is read once per epoch, by one rank, and
    each rank downloads only its own share (plus its ``max_ahead``). The rank and world size
    come from ``torch.distributed`` once its process group is initialized, else from ``RANK``
    and ``WORLD_SIZE``; with neither, there is one rank. ``by_rank=False``: every rank reads
    every name (ranks sharing one ``output_dir`` still download each file once: the others
    wait for it and find it in place); give it where each rank already passes its own names. Only rank 0 draws a progress bar unless
    ``progress=True`` is given.

    Raises:
        UsageError: with ``by_rank``, ``RANK`` / ``WORLD_SIZE`` that are not a rank of a world;
        two signings of one object with different hashes or ``out=``/``dir=``; when an epoch
        starts, fewer names than ranks.
    """
    from prefetch.adapters.torch_data import StreamDataset
    from prefetch.api import _names, switch

    switch(by_rank, "by_rank")
    return StreamDataset(_names(names), samples=samples, transform=transform, by_rank=by_rank, options=options)


def tf_generator(names, *, samples: bool = False, keys=None, shard=None, **options):
    """A callable for ``tf.data.Dataset.from_generator``: each call iterates ``as_completed`` afresh.

    Items are paths (``str``; ``output_signature=tf.TensorSpec((), tf.string)``), or
    with ``samples=True`` the samples of tar shards: dicts as ``torch_dataset`` gives,
    or, with ``keys=("jpg", "cls")``, tuples of those members' bytes in that order
    (``output_signature=(tf.TensorSpec((), tf.string),) * 2``). When TensorFlow stops
    iterating (or the generator is closed), the downloads stop, resumable.

    ``shard=(index, count)``: this input pipeline's share of the names (and ``urls=`` entries),
    dealt round robin as ``torch_dataset`` deals them to ranks (``index, index+count, ...``): it
    downloads and reads only those. Give it under a multi-worker strategy from
    ``distribute_datasets_from_function``'s ``InputContext`` (``(ctx.input_pipeline_id,
    ctx.num_input_pipelines)``). Never read from ``TF_CONFIG`` by itself: tf.data's own
    auto-sharding of a generator's dataset keeps every N-th element of each worker's stream, so
    sharding the names too would leave each worker 1/N² of the data; without ``shard`` every
    worker reads (and downloads) every name.

    Raises:
        UsageError: a ``shard`` that is not ``(index, count)`` with ``0 <= index < count``, or
        fewer names than ``count`` (a pipeline with nothing would end its epoch at once).
    """
    from prefetch.api import _names

    from prefetch.adapters.deal import objects

    names = _names(names)  # (UsageError now, not in the first epoch)
    urls = options.get("urls") or []
    objects(names, [urls] if isinstance(urls, (str, Mapping)) else list(urls))  # (two signings that disagree)
    keys = tuple(keys) if keys is not None else None
    if shard is not None:
        names, options = _deal(names, options, shard)

    def generate():
        from prefetch.streaming import as_completed

        with as_completed(names, **options) as paths:
            for path in paths:
                if not samples:
                    yield str(path)
                    continue
                for sample in iter_tar_samples(path):
                    yield sample if keys is None else tuple(sample[k] for k in keys)

    return generate


def _deal(names: list[str], options: dict, shard) -> tuple[list[str], dict]:
    """Pipeline ``index`` of ``count``'s names and ``urls=`` entries, dealt as one list round robin.

    Raises:
        UsageError: a bad ``shard``, or fewer items than pipelines.
    """
    from prefetch.adapters.deal import deal_items
    from prefetch.errors import UsageError

    if (not isinstance(shard, (tuple, list)) or len(shard) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in shard) or not 0 <= shard[0] < shard[1]):
        raise UsageError(f"shard must be (index, count) with 0 <= index < count, e.g. (ctx.input_pipeline_id, "
                         f"ctx.num_input_pipelines); got {shard!r}")
    index, count = shard
    urls = options.get("urls") or []
    urls = [urls] if isinstance(urls, (str, Mapping)) else list(urls)
    mine, my_urls = deal_items(list(dict.fromkeys(names)), urls, index, count, lambda n: (
        f"tf_generator: {n} name(s) for {count} input pipelines: names are dealt whole "
        "(an hf:// repo or a dataset is one name); give at least one per pipeline (the shards' "
        "URLs), or no shard for every pipeline to read them all"))
    options = dict(options)
    if urls:
        options["urls"] = my_urls
    return mine, options


__all__ = ["iter_tar_samples", "tf_generator", "torch_dataset"]
