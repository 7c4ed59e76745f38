"""Where files go: the Keras cache root and the per-version file names."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Mapping

from prefetch.fs.paths import expand_path


class KerasLayout(str, Enum):
    """The cache naming a Keras version expects for archive datasets (cifar)."""

    LEGACY = "legacy"  # Keras 2, tf-keras, Keras 3.0-3.5: <name>.tar.gz + <name>/
    TARGET = "target"  # Keras >= 3.6: <name>-target_archive + <name>-target/<name>/
    NONE = "none"  # no Keras installed


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


@dataclass(frozen=True)
class KerasInstall:
    """Which Keras packages are installed, read from package metadata (no import)."""

    keras: str | None
    tf_keras: str | None

    @property
    def layouts(self) -> list[KerasLayout]:
        """The cache layouts the installed packages read."""
        found = []
        if self.tf_keras or (self.keras and _version_tuple(self.keras) < (3, 6)):
            found.append(KerasLayout.LEGACY)
        if self.keras and _version_tuple(self.keras) >= (3, 6):
            found.append(KerasLayout.TARGET)
        return found or [KerasLayout.NONE]


def detect_keras() -> KerasInstall:
    """Read the installed keras / tf-keras versions without importing them."""
    from importlib import metadata

    def version(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return KerasInstall(keras=version("keras"), tf_keras=version("tf-keras") or version("tf_keras"))


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def part_path(final: Path) -> Path:
    """The in-flight data file for ``final``."""
    return final.with_name(final.name + ".part")


def state_path(final: Path) -> Path:
    """The resume state file that sits beside ``final``'s ``.part``."""
    return final.with_name(final.name + ".part.json")
