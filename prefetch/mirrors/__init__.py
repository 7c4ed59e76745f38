"""Mirrors: the catalog, measuring them, and the pip/uv/conda/HF configs that use them.

Owns:
    catalog.py  built-in ``mirrors.toml`` plus the user's; dataset mirror names
    bench.py    throughput of each mirror on a real package file, in parallel, with a deadline
    configs/    one writer per tool (pip, uv, conda, hf), backups, ``use``/``restore`` (restore.py:
                a restore keeps what the user edited after ``use``; marks.py: the hosts prefetch
                trusted, and one ``use``/``restore`` at a time)

May import: ``errors``, ``model``, ``fs``, ``net``, ``ui``, ``cache``, ``store``.
"""
