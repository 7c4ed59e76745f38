"""Names and ``urls=`` entries dealt round robin: one share for each DDP rank, DataLoader
worker (``torch_data.py``) or tf.data input pipeline (``tf_generator``). No torch, no TensorFlow.

An item is one object: the links that name it (one URL signed twice, with and without a token:
``net/urls.link_key``) are dealt together, so the share that yields its file holds all of them
(``get`` makes them one file with the others as its second sources) and no other share does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Callable


def deal_items(names: list[str], urls: list, index: int, count: int,
               too_few: Callable[[int], str] | None = None) -> tuple[list[str], list]:
    """Share ``index`` of ``count`` of the objects of ``names`` then ``urls`` taken as one list
    (every ``count``-th object from ``index``, :func:`objects`): (names, url entries).

    Raises:
        UsageError: two links of one object that disagree (:func:`objects`); ``too_few`` given
        and fewer objects than ``count`` (a share with nothing would end its epoch at once); its
        message is ``too_few(number of objects)``.
    """
    items = objects(names, urls)
    if too_few is not None and len(items) < count:
        from prefetch.errors import UsageError

        raise UsageError(too_few(len(items)))
    mine = [link for links in items[index::count] for link in links]
    return [n for is_name, n in mine if is_name], [u for is_name, u in mine if not is_name]


def objects(names: list[str], urls: list) -> list[list[tuple[bool, object]]]:
    """``names`` then ``urls`` as the objects they name, in order of first mention: for each, its
    items as ``(is a name, item)``. An http(s) link's object is its ``link_key`` (a new signature
    or token is the same object); any other name or entry is its own.

    Raises:
        UsageError: two links of one object with different hashes, or saved under different
        names (``out=``, ``dir=``): a dataset reads an object once, and which one is meant is
        not for prefetch to pick.
    """
    found: dict[object, tuple[list, tuple]] = {}
    for item in [*((True, n) for n in names), *((False, u) for u in urls)]:
        key, facts = _object(*item)
        held = found.get(key)
        if held is None:
            found[key] = ([item], facts)
            continue
        _check_same(held[1], facts)
        held[0].append(item)
    return [links for links, _ in found.values()]


def _object(is_name: bool, item) -> tuple[object, tuple]:
    """(which object ``item`` names, (its URL, where it is saved, its hashes)) of a name or entry."""
    entry = item if isinstance(item, Mapping) else {"url": item}
    url = entry.get("url")
    scheme = url[:8].lower() if isinstance(url, str) else ""
    if not (scheme.startswith("http://") or scheme == "https://"):
        return (is_name, repr(sorted((str(k), repr(v)) for k, v in entry.items()))), ()
    from prefetch.flow.planners.url_list import split_fragment, url_file_name
    from prefetch.net.urls import link_key

    bare, hashes = split_fragment(url)
    hashes = {k.lower(): str(v).lower() for k, v in hashes.items()}
    hashes.update((k, str(entry[k]).lower()) for k in ("sha256", "md5") if entry.get(k))
    return link_key(bare), (url, (entry.get("dir"), entry.get("out") or url_file_name(bare)), hashes)


def _check_same(first: tuple, other: tuple) -> None:
    """Two links of one object agree on where it is saved and on its hash.

    Raises:
        UsageError: they do not.
    """
    from prefetch.errors import UsageError
    from prefetch.net.urls import redact_url

    (url, place, hashes), (url2, place2, hashes2) = first, other
    what = next((f"{k}=" for k, a, b in zip(("dir", "out"), place, place2) if a != b), None)
    if what is None:  # (one hash per algorithm: a sha256 on one link and an md5 on the other are both checked)
        what = next((k for k in ("sha256", "md5") if k in hashes and k in hashes2 and hashes[k] != hashes2[k]), None)
    if what is not None:
        raise UsageError(f"{redact_url(url)} and {redact_url(url2)} are one object (one link signed twice) with "
                         f"different {what}: a dataset reads each object once; give it once, or name both alike")
