"""Operations over what is on disk: list, verify, usage, ``rm`` and ``clean``.

Owns:
    listing.py       each dataset's local state; re-verification of cached files
    housekeeping.py  usage on disk, ``rm`` of datasets, ``clean`` of stale partials and temp files
    hub.py           the same for the Hugging Face cache
    torchvision.py   ``list`` and ``verify`` of torchvision: names and torch.hub checkpoints
    torch_files.py   ``rm`` of what prefetch placed for them; the folders ``clean`` tidies
    modelscope.py    ``rm`` and ``list`` of ModelScope repos (``ms://``)
    removal.py       removing paths (never through a link, never another user's) and counting them

They sit above what they inspect. May import: ``errors``, ``model``, ``fs``,
``net``, ``ui``, ``cache``, ``archive``, ``engine``, ``store``, ``mirrors``, ``hf``, ``ms``, ``flow``.
"""
