"""Where files go: the Keras cache root and the per-version file names.

Which Keras is installed, and the cache layouts it reads, is ``cache/keras.py`` (loaded when
a dataset is planned).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from prefetch.fs.paths import expand_path, nearest_existing


def keras_root(*, cache_dir: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Return the Keras cache root (the directory that holds ``datasets/``).

    ``--cache-dir``; else as Keras 3 finds it (``keras.src.backend.config``, then ``get_file``):
    ``$KERAS_HOME`` when set, else ``~/.keras`` when the home directory is writable; and
    ``/tmp/.keras`` when that root can be neither written nor created (an empty ``KERAS_HOME``
    never can: Keras then reads ``/tmp/.keras``).
    """
    if cache_dir is not None:
        return expand_path(cache_dir, "--cache-dir")
    env = os.environ if env is None else env
    fallback = Path("/tmp/.keras")
    if "KERAS_HOME" in env:
        if not env["KERAS_HOME"]:
            return fallback
        root = expand_path(env["KERAS_HOME"], "KERAS_HOME")
    else:
        home = Path(env.get("HOME") or os.path.expanduser("~"))
        if not os.access(home, os.W_OK):
            return fallback
        root = home / ".keras"
    return root if _writable_or_creatable(root) else fallback


def _writable_or_creatable(path: Path) -> bool:
    """Keras's test (``os.access(root, W_OK)`` after its import made the folder when it could)."""
    folder = nearest_existing(path)
    return os.path.isdir(folder) and os.access(folder, os.W_OK)


def datasets_dir(root: Path) -> Path:
    """Return ``<root>/datasets``, where ``keras.datasets.*`` look."""
    return root / "datasets"


def part_path(final: Path) -> Path:
    """The in-flight data file for ``final``."""
    return final.with_name(final.name + ".part")


def state_path(final: Path) -> Path:
    """The resume state file that sits beside ``final``'s ``.part``."""
    return final.with_name(final.name + ".part.json")
