"""Safe extraction: every member checked, each top-level entry complete or absent.

Owns:
    extract.py  ``extract_archive``/``detect_format``: the entry point
    format.py   which format a file is (magic bytes), decompressors, read errors
    members.py  per-member checks (no absolute paths, no ``..``, no links out, no devices)
    limits.py   budgets against decompression bombs
    readers.py  tar and zip readers that write through the checks
    tar_count.py a tar's members counted ahead (headers only), to refuse one past the limit early
    place.py    a staging dir beside the target, then rename into place
    gunzip.py   one .gz/.xz file decompressed beside itself (torchvision's MNIST family)

May import: ``errors``, ``model``, ``fs``.
"""
