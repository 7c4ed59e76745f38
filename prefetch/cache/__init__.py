"""The caches prefetch fills: their layouts, the dataset registry, and placing files.

Owns:
    layout.py     the Keras root (``KERAS_HOME``), ``datasets/``, ``.part`` and state names
    keras.py      which Keras is installed (package metadata) and the cache layouts it reads
    registry.py   built-in ``datasets.toml`` plus user registry files -> ``DatasetSpec``
    plans.py      ``plan_files``: a dataset's ``FilePlan`` s under a Keras root
    placement.py  what is already good at a final path; renames, aliases, extraction markers
    completion.py the completion records that prove a placed file is prefetch's (on the file or in placed/)
    torchvision.py  torchvision's datasets and weights as data (torchvision.toml, torch_weights.toml)
    copies.py     where prefetch placed a file another cache's dataset shares (torchvision's CIFAR-10 = Keras's)

May import: ``errors``, ``model``, ``fs``, ``net`` (URL checks).
"""
