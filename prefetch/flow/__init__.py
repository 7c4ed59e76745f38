"""A ``get`` request: names -> file plans -> lock -> transfer -> verify -> extract -> place.

Owns:
    request.py  ``GetRequest`` (what a job record stores), ``plan_request``, ``run_request``
    urls.py     plain URLs and ``-i`` lists (``URL#sha256=HEX``, ``out=``, ``dir=``)
    files.py    ``fetch_file``: the stages for one file (lock, transfer, verify, extract, place)
    place_extras.py its extractions, decompression and extra names, before the final name
    file_list.py ``fetch_files``: many files at once on a bounded pool, one failure harming none
    file_batch.py the bulk lane: a chunk of fresh small files of one near host, one flush for all
    leftovers.py what a killed run left beside a file, each directory listed once per run
    foreign_tree.py another account's extraction read as it is (a shared folder not ours to write)
    served_names.py --content-disposition: a URL's file named by its server before its download
    options.py  ``FetchOptions``

The CLI, the background worker and the Python API are three drivers of this flow.
May import every layer below it: ``errors``, ``model``, ``fs``, ``net``, ``ui``,
``cache``, ``archive``, ``engine``, ``store``, ``mirrors``, ``hf``.
"""
