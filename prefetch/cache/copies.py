"""Where prefetch placed a file that another cache's dataset shares byte for byte.

torchvision's ``cifar-10-python.tar.gz`` under a user's ``--root`` is Keras's
``cifar10`` archive. When prefetch places such a file (a ``FilePlan`` with ``shares``
set, e.g. ``"cifar10/cifar-10-python.tar.gz"``), it notes the path here, in its state
dir: a later ``prefetch get cifar10`` finds it and hard-links (or copies) it instead of
downloading it again, after checking it against Keras's own hash. The note is only a
hint: a path that is gone or no longer matches is skipped.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

MAX_PATHS = 16  # the newest places kept per shared file


def index_path(state: Path, key: str) -> Path:
    return state / "copies" / (hashlib.sha1(key.encode("utf-8", "surrogateescape")).hexdigest()[:24] + ".json")


def known_copies(state: Path, key: str) -> list[Path]:
    """Paths where prefetch placed the file ``key`` names (newest first); never raises."""
    from prefetch.fs import safefs

    try:
        record = json.loads(safefs.read_bytes(index_path(state, key)) or b"{}")
        paths = record.get("paths", []) if record.get("key") == key else []
        return [Path(p) for p in paths if isinstance(p, str) and p.startswith("/")]
    except (OSError, ValueError, AttributeError, safefs.UnsafePathError):
        return []


def note_copy(state: Path, key: str, path: Path) -> None:
    """Add ``path`` to the places of ``key`` (best effort: without it the file is downloaded again)."""
    from prefetch.errors import PrefetchError
    from prefetch.fs.files import replace_file

    here = str(path.absolute())
    paths = [here] + [str(p) for p in known_copies(state, key) if str(p) != here]
    try:
        index_path(state, key).parent.mkdir(parents=True, exist_ok=True)
        replace_file(index_path(state, key), json.dumps({"key": key, "paths": paths[:MAX_PATHS]}).encode(),
                     checked=True)
    except (OSError, PrefetchError):
        pass
