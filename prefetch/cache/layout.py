"""Where files go: the Keras cache root and the per-version file names.

Which Keras is installed, and the cache layouts it reads, is ``cache/keras.py`` (loaded when
a dataset is planned).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from prefetch.fs.paths import expand_path


def keras_root(*, cache_dir: str | Path | None = None, env: Mapping[str, str] | None = None) -> Path:
    """Return the Keras cache root (the directory that holds ``datasets/``).

    Mirrors Keras 3: ``--cache-dir``, else ``$KERAS_HOME``, else ``~/.keras``
    when the home directory is writable, else ``/tmp/.keras``.
    """
    if cache_dir is not None:
        return expand_path(cache_dir, "--cache-dir")
    env = os.environ if env is None else env
    if env.get("KERAS_HOME"):
        return expand_path(env["KERAS_HOME"], "KERAS_HOME")
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    if os.access(home, os.W_OK):
        return home / ".keras"
    return Path("/tmp/.keras")


def datasets_dir(root: Path) -> Path:
    """Return ``<root>/datasets``, where ``keras.datasets.*`` look."""
    return root / "datasets"


def part_path(final: Path) -> Path:
    """The in-flight data file for ``final``."""
    return final.with_name(final.name + ".part")


def state_path(final: Path) -> Path:
    """The resume state file that sits beside ``final``'s ``.part``."""
    return final.with_name(final.name + ".part.json")
