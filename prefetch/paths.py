"""Where prefetch keeps its own state and configuration (not the Keras cache)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

APP_NAME = "prefetch"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """Return the directory for job records, logs and locks.

    ``PREFETCH_HOME`` overrides the platform default (platformdirs' user state dir).
    """
    env = os.environ if env is None else env
    home = env.get("PREFETCH_HOME")
    if home:
        return Path(home).expanduser() / "state"
    import platformdirs

    return Path(platformdirs.user_state_dir(APP_NAME))


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """Return the directory for user ``registry.toml`` and ``mirrors.toml``.

    ``PREFETCH_HOME`` moves it to ``$PREFETCH_HOME/config``; otherwise the
    platform's user config dir (``~/.config/prefetch`` on Linux).
    """
    env = os.environ if env is None else env
    home = env.get("PREFETCH_HOME")
    if home:
        return Path(home).expanduser() / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME))
