"""How the user typed prefetch, so the commands it suggests can be typed the same way.

``pip install --user`` (a notebook's non-root user) puts the ``prefetch`` script in
``~/.local/bin``, which a ``!`` cell's shell often does not have on its ``PATH``: the user runs
``python -m prefetch ...`` instead, and a hint saying ``prefetch status`` would only get
``command not found``. When this process is ``python -m prefetch`` and no ``prefetch`` is on
``PATH``, the suggestions say ``python -m prefetch``.
"""

from __future__ import annotations

import os
import sys

MODULE = "python -m prefetch"


def command_name(env=None) -> str:
    """``prefetch``, or ``python -m prefetch`` when that is how this process was started and
    no ``prefetch`` command is on ``PATH``; ``PREFETCH_COMMAND`` (``prefetch`` or
    ``python -m prefetch``) says which where that guess is wrong."""
    env = os.environ if env is None else env
    chosen = (env.get("PREFETCH_COMMAND") or "").strip()
    if chosen in ("prefetch", MODULE):
        return chosen
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is None or spec.name != "prefetch.__main__":
        return "prefetch"
    for directory in (env.get("PATH") or os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", "prefetch")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return "prefetch"
    return MODULE


def typed(text: str) -> str:
    """``text`` with each suggested command (`` `prefetch ...` ``) as the user can type it."""
    if "`prefetch " not in text:
        return text
    name = command_name()
    return text if name == "prefetch" else text.replace("`prefetch ", f"`{name} ")


def follow_line(job_id: str) -> str:
    """The line after ``get -b`` and ``resume``: how to follow the job."""
    name = command_name()
    return f"follow with: {name} status {job_id} | {name} log -f {job_id} | {name} wait {job_id}"
