"""ModelScope repos, prefetched into the cache layout the ``modelscope`` library reads.

``names`` (``ms://`` names, endpoint, token, cache root), ``api`` (the file listing and
the file URL of ``/api/v1``), ``plan`` (``MsPlan`` and its files as ``FilePlan`` s).

May import: ``errors``, ``model``, ``fs``, ``net``, ``ui``, ``cache``, ``engine``,
``store``, ``mirrors`` (the endpoint's catalog name) and ``hf`` (file selection and the
client that keeps a token on the endpoint's origin, shared with Hugging Face repos).
"""
