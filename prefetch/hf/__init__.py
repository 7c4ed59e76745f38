"""Hugging Face Hub repos, prefetched into the cache layout huggingface_hub reads.

* ``names``: ``hf://`` names, the endpoint, the token and the cache root (from the
  same variables huggingface_hub reads);
* ``plan``: ``HubPlan`` (what a job records) and ``--include``/``--exclude``;
* ``api``: the two Hub API calls a download needs (revision -> commit, file tree);
* ``cache_layout``: ``models--ORG--NAME/{blobs,snapshots,refs}`` as huggingface_hub
  writes it;
* ``download``: one repo: reuse blobs, transfer the rest with prefetch's engine, verify,
  link, write the ref;
* ``blob_lock``: huggingface_hub's own per-blob lock, held while a blob is fetched;
* ``repo_progress``: a repo's summed progress over its files' events.

May import: ``errors``, ``model``, ``fs``, ``net``, ``ui``, ``cache``, ``engine``,
``store``, ``mirrors`` (the endpoint's catalog name and the HF config).
"""
