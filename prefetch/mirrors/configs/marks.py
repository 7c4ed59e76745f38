"""Which trusted hosts prefetch added to which config (``mirror-marks.json``), and the lock
that lets one ``mirror use``/``restore`` at a time read and change the configs and the marks.

Two runs at once (two notebook cells, a script and a shell) each read a config and the marks,
then write both: without the lock the later writer drops what the earlier recorded (a trusted
host of prefetch's becomes the user's, and switching to https keeps it).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from prefetch.errors import LocalFileError
from prefetch.mirrors.configs.backup import read_state, write_state

MARKS_FILE = "mirror-marks.json"
LOCK_FILE = "mirror.lock"
LOCK_TIMEOUT = 120.0  # seconds: a `use fastest` benches before it takes the lock, so a holder is quick


@contextmanager
def settings_lock(state_dir: Path) -> Iterator[None]:
    """Exclusive, across processes, for reading and changing the configs and the marks.

    Raises:
        LockTimeoutError: another run held it for ``LOCK_TIMEOUT`` seconds.
        LocalFileError: the state dir or the lock file cannot be created or opened.
        UnsafePathError: a link or FIFO at the lock file.
    """
    from prefetch.fs.lock_files import exclusive_file_lock
    from prefetch.fs.safefs import make_dirs

    path = Path(state_dir) / LOCK_FILE
    try:
        make_dirs(Path(state_dir))
        held = exclusive_file_lock(path, timeout=LOCK_TIMEOUT, what="the mirror settings lock")
        held.__enter__()
    except OSError as exc:
        raise LocalFileError(f"cannot lock {path}: {exc.strerror or exc}; check the permissions of"
                             " prefetch's state dir (PREFETCH_HOME moves it)") from None
    try:
        yield
    finally:
        held.__exit__(None, None, None)


def read_marks(state_dir: Path) -> dict:
    from prefetch.errors import UnsafePathError

    try:
        data = json.loads((read_state(Path(state_dir) / MARKS_FILE) or b"{}").decode("utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError, UnsafePathError):  # (a link there: not trusted; writing it is refused)
        return {}


def claim_hosts(marks: dict, hosts_added: Mapping[str, list[str]]) -> dict:
    """``marks`` with ``hosts_added`` owned too (what was owned stays: the edit may not happen)."""
    claimed = dict(marks)
    for path, hosts in hosts_added.items():
        owned = list(claimed.get(path, {}).get("hosts", []))
        more = [h for h in hosts if h not in owned]
        if more:
            claimed[path] = {"hosts": owned + more}
    return claimed


def write_marks(state_dir: Path, marks: dict) -> None:
    write_state(Path(state_dir) / MARKS_FILE, (json.dumps(marks, indent=2, sort_keys=True) + "\n").encode())
