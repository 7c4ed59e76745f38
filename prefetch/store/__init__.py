"""The team store on S3-compatible object storage, and static mirror exports.

Owns:
    s3.py      ``s3://BUCKET/PREFIX`` parsing, boto3 (lazily, an extra), presigned URLs
    seed.py    ``StoreSources``: read from the store first, upload what it lacked (``--seed``)
    abandon.py the store calls a stopped run leaves behind (a hung store never holds a stop)
    claims.py  a seed claim's body: its holder, its age, a holder of this machine that is gone
    push.py    ``prefetch push``: verified cached files into the store
    export.py  ``prefetch export``: the flat mirror layout plus ``SHA256SUMS``
    nltk_mirror.py  NLTK data in the gh-pages layout: the store's ``index.xml`` for ``get``;
               ``push``/``export`` of ``nltk:`` packages with their merged ``index.xml``

May import: ``errors``, ``model``, ``fs``, ``net``, ``cache``, ``engine``.
"""
