"""Hugging Face: persist ``HF_ENDPOINT`` where new kernels and shells pick it up.

huggingface_hub reads ``HF_ENDPOINT`` once, at import. Two files carry it:

* ``$IPYTHONDIR/profile_default/startup/00-prefetch-hf-endpoint.py`` (default
  ``~/.ipython``): run by every new IPython/Jupyter kernel; the file is ours alone.
* a managed block in ``~/.bashrc``, for terminals and shells started from them;
  re-running replaces the block, never adds a second one.

A kernel that is already running keeps its old value: ``%env HF_ENDPOINT=...`` or a
restart is needed.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from prefetch.errors import PrefetchError

BEGIN = "# >>> prefetch HF_ENDPOINT >>>"
END = "# <<< prefetch HF_ENDPOINT <<<"
STARTUP_NAME = "00-prefetch-hf-endpoint.py"


@dataclass(frozen=True)
class HfEffective:
    """HF_ENDPOINT now (this process) and as persisted for new kernels."""

    current: str | None  # os.environ of this process
    persisted: str | None  # from the IPython startup file
    source: str


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def ipython_startup_path(*, env: Mapping[str, str] | None = None) -> Path:
    """The IPython startup file prefetch owns."""
    return ipython_dir(env=os.environ if env is None else env) / "profile_default" / "startup" / STARTUP_NAME


def ipython_dir(*, env: Mapping[str, str]) -> Path:
    """The directory IPython's ``get_ipython_dir`` picks, made absolute.

    ``IPYTHONDIR`` (``~`` expanded, as IPython does); else ``~/.ipython``, unless that does
    not exist and ``$XDG_CONFIG_HOME/ipython`` (``~/.config/ipython``) is a writable
    directory: IPython then uses that one, and creating ``~/.ipython`` would make it
    drop the user's profile there for an empty one.
    """
    home = _home(env)
    value = env.get("IPYTHONDIR") or env.get("IPYTHON_DIR")
    if value:
        if value == "~" or value.startswith("~/"):
            value = str(home) + value[1:]
        return Path(os.path.abspath(os.path.expanduser(value)))
    default = home / ".ipython"
    xdg = Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "ipython"
    linux_like = os.name == "posix" and sys.platform != "darwin"  # IPython's get_xdg_dir
    if linux_like and not default.exists() and xdg.is_dir() and os.access(xdg, os.W_OK):
        return Path(os.path.abspath(xdg))
    return Path(os.path.abspath(default))


def shell_rc_path(*, env: Mapping[str, str] | None = None) -> Path:
    """The shell file that gets the managed block (``~/.bashrc``)."""
    env = os.environ if env is None else env
    return _home(env) / ".bashrc"


def render_startup(endpoint: str) -> str:
    """The IPython startup file's text."""
    return (
        "# Written by `prefetch mirror use --tool hf`; `prefetch mirror restore --tool hf` removes it.\n"
        "# huggingface_hub reads HF_ENDPOINT once, at import: this runs first in every new kernel.\n"
        "# It wins over an HF_ENDPOINT the platform exports, as the ~/.bashrc block does in shells.\n"
        "import os\n\n"
        f"os.environ[\"HF_ENDPOINT\"] = {endpoint!r}\n"
    )


def edit_shell_rc(text: str | None, *, endpoint: str) -> str:
    """Put ``export HF_ENDPOINT=...`` in the managed block (replaced in place, never duplicated)."""
    text = text or ""
    newline = "\r\n" if "\r\n" in text else "\n"
    block = f"{BEGIN}{newline}export HF_ENDPOINT={shlex.quote(endpoint)}{newline}{END}{newline}"
    # a block never spans another BEGIN: a BEGIN whose END the user deleted must not swallow
    # every line down to the next block's END
    pattern = re.compile(
        rf"{re.escape(BEGIN)}(?:(?!{re.escape(BEGIN)}).)*?{re.escape(END)}[^\S\r\n]*(\r?\n|$)", re.S
    )
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1)
    if text and not text.endswith(("\n", "\r")):
        text += newline
    return f"{text}{block}"


def hf_notes(endpoint: str) -> list[str]:
    """What the user must do for a running kernel."""
    return [
        f"a running kernel keeps its old HF_ENDPOINT: run `%env HF_ENDPOINT={endpoint}` in it"
        " before importing huggingface_hub/transformers, or restart the kernel"
    ]


def hf_override_warnings(endpoint: str, *, env: Mapping[str, str] | None = None) -> list[str]:
    """An inherited ``HF_ENDPOINT`` that beats the persisted one."""
    env = os.environ if env is None else env
    if env.get("HF_ENDPOINT") and env["HF_ENDPOINT"] != endpoint:
        return [
            f"HF_ENDPOINT={env['HF_ENDPOINT']} is set in this environment: new kernels and shells get {endpoint},"
            f" but this kernel or shell keeps it; run `%env HF_ENDPOINT={endpoint}` in a running kernel (before"
            " importing huggingface_hub/transformers) or restart it"
        ]
    return []


def read_hf_effective(*, env: Mapping[str, str] | None = None) -> HfEffective:
    """HF_ENDPOINT in this process, and the value new kernels will get."""
    env = os.environ if env is None else env
    path = ipython_startup_path(env=env)
    persisted = None
    try:
        from prefetch.fs.safefs import read_file

        text = read_file(path).decode("utf-8", errors="replace")
        match = re.search(r"HF_ENDPOINT\"(\]\s*=|,)\s*'([^']*)'", text)
        persisted = match.group(2) if match else None
        if match and match.group(1) == "," and env.get("HF_ENDPOINT"):  # an older prefetch's setdefault:
            persisted = env["HF_ENDPOINT"]  # new kernels that inherit this value keep it
    except (OSError, PrefetchError):  # (absent, or a FIFO there: never read, it would block)
        pass
    source = str(path) if persisted else "huggingface_hub default (HF_ENDPOINT neither set nor persisted)"
    return HfEffective(current=env.get("HF_ENDPOINT"), persisted=persisted, source=source)
