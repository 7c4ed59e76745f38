"""``prefetch demo``: the whole flow offline, against a small origin of its own.

Owns:
    run.py     the demo: a synthetic dataset, an interrupted download, a resume, placement
    origin.py  a Range/If-Range HTTP origin on 127.0.0.1
    http_rules.py  the rules it answers by: dates, ETags, Range, If-Range (pure functions)

May import every layer below ``api``.
"""
