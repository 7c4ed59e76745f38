"""Where prefetch keeps its own state and configuration (not the Keras cache)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

APP_NAME = "prefetch"


def expand_path(text: str | os.PathLike, what: str) -> Path:
    """``text`` with a leading ``~`` or ``~user`` expanded.

    Raises:
        UsageError: ``~user`` names no user (or ``~`` no home directory), e.g.
            ``KERAS_HOME='~nosuchuser/x'``.
    """
    text = os.fspath(text)
    if not text.startswith("~"):
        return Path(text)
    expanded = os.path.expanduser(text)
    if expanded.startswith("~"):
        from prefetch.errors import UsageError

        user = text[1:].split(os.sep, 1)[0]
        who = f"no user {user!r}" if user else "no home directory"
        raise UsageError(f"{what}={text!r}: there is {who} to expand {text.split(os.sep, 1)[0]!r}; "
                         f"give an absolute path")
    return Path(expanded)


def expand_home(text: str, env: Mapping[str, str], what: str) -> Path:
    """``text`` with a leading ``~`` expanded as ``os.path.expanduser`` does, ``~`` from ``env``'s ``HOME``.

    The libraries' caches (huggingface_hub, modelscope, nltk) expand their variables with
    ``expanduser``: ``~/x`` is ``$HOME/x`` and ``~alice/x`` is alice's home (a lab's shared
    folder), never ``$HOME`` + ``alice/x``.

    Raises:
        UsageError: ``~user`` names no user.
    """
    if text == "~" or text.startswith("~/"):
        home = env.get("HOME")
        if home:
            return Path(home + text[1:])
    return expand_path(text, what)


def current_dir() -> Path:
    """``os.getcwd()``; a removed current directory is one line (LocalFileError), not a traceback.

    Raises:
        LocalFileError: the current directory was removed (a notebook's, a shell's).
    """
    try:
        return Path(os.getcwd())
    except FileNotFoundError:
        from prefetch.errors import LocalFileError

        raise LocalFileError("the current directory was removed: cd to one that exists, or give absolute paths "
                             "(-P DIR, -o FILE, --cache-dir DIR)") from None


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """Return the directory for job records, logs and locks.

    ``PREFETCH_HOME`` overrides the platform default (platformdirs' user state dir).
    When that cannot be created (an unwritable or read-only home directory, where
    Keras itself falls back to ``/tmp/.keras``), a private directory in the temp dir
    is used instead: ``$TMPDIR/prefetch-<uid>`` (mode 0700, checked to be ours).

    Raises:
        UnsafePathError: the fallback name is taken by a link or another user's entry.
        LocalFileError: the fallback cannot be created either.
    """
    env = os.environ if env is None else env
    home = env.get("PREFETCH_HOME")
    if home:
        return expand_path(home, "PREFETCH_HOME") / "state"
    import platformdirs

    default = Path(platformdirs.user_state_dir(APP_NAME))
    if os.path.isdir(default) and os.access(default, os.W_OK | os.X_OK):
        return default
    try:
        default.mkdir(parents=True, exist_ok=True)
        return default
    except OSError:
        return fallback_state_dir(env)


def fallback_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$TMPDIR/prefetch-<uid>``: the state dir when the home directory is not writable."""
    import tempfile

    from prefetch.errors import LocalFileError
    from prefetch.fs.safefs import euid, private_dir

    env = os.environ if env is None else env
    base = env.get("TMPDIR") or tempfile.gettempdir()
    path = Path(base) / f"{APP_NAME}-{max(euid(), 0)}"
    try:
        return private_dir(path)
    except OSError as exc:
        raise LocalFileError(
            f"cannot create prefetch's state dir {path} (the home directory is not writable either): "
            f"{exc.strerror or exc}; set PREFETCH_HOME to a writable directory"
        ) from None


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """Return the directory for user ``registry.toml`` and ``mirrors.toml``.

    ``PREFETCH_HOME`` moves it to ``$PREFETCH_HOME/config``; otherwise the
    platform's user config dir (``~/.config/prefetch`` on Linux).
    """
    env = os.environ if env is None else env
    home = env.get("PREFETCH_HOME")
    if home:
        return expand_path(home, "PREFETCH_HOME") / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME))


def nearest_existing(path: Path) -> Path:
    """``path`` or its nearest parent that exists (a link counts, even a dangling one): where a
    folder not made yet would be made, so whose permissions decide whether it can be."""
    path = Path(path)
    for folder in (path, *path.absolute().parents):
        if os.path.lexists(folder):
            return folder
    return Path("/")
