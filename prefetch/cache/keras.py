"""Which Keras packages are installed (read from package metadata, never imported), and the
cache layouts they read. Loaded when a dataset is planned (and by ``prefetch doctor``): a get of
a URL never needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class KerasLayout(str, Enum):
    """The cache naming a Keras version expects for archive datasets (cifar)."""

    LEGACY = "legacy"  # Keras 2, tf-keras, Keras 3.0-3.5: <name>.tar.gz + <name>/
    TARGET = "target"  # Keras >= 3.6: <name>-target_archive + <name>-target/<name>/
    NONE = "none"  # no Keras installed


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
