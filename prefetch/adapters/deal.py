"""Names and ``urls=`` entries dealt round robin: one share for each DDP rank, DataLoader
worker (``torch_data.py``) or tf.data input pipeline (``tf_generator``). No torch, no TensorFlow."""

from __future__ import annotations

from typing import Callable


def deal_items(names: list[str], urls: list, index: int, count: int,
               too_few: Callable[[int], str] | None = None) -> tuple[list[str], list]:
    """Share ``index`` of ``count`` of ``names`` then ``urls`` taken as one list (every
    ``count``-th item from ``index``): (names, url entries).

    Raises:
        UsageError: ``too_few`` given and fewer items than ``count`` (a share with nothing
        would end its epoch at once); its message is ``too_few(number of items)``.
    """
    items = [*((True, n) for n in names), *((False, u) for u in urls)]
    if too_few is not None and len(items) < count:
        from prefetch.errors import UsageError

        raise UsageError(too_few(len(items)))
    mine = items[index::count]
    return [n for is_name, n in mine if is_name], [u for is_name, u in mine if not is_name]
