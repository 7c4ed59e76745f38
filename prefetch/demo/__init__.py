"""``prefetch demo``: the whole flow offline, against a small origin of its own.

Owns:
    run.py     the demo: a synthetic dataset, an interrupted download, a resume, placement
    origin.py  a Range/If-Range HTTP origin on 127.0.0.1

May import every layer below ``api``.
"""
