"""A package's names loaded from their modules on first access (PEP 562).

``prefetch`` and ``prefetch.jobs`` are imported by processes that use few of their names (a
command line, the ``get -b`` launcher, a background worker); each name is imported from its
module the first time it is read, then found directly.

Modules imported lazily are imported on whatever thread first needs them, a download thread
included; a process forked meanwhile (a torch DataLoader worker, a ``multiprocessing`` "fork"
pool) inherits that module's import lock held by a thread it does not have (CPython does not
reset those locks in a child). The child's own first import of it then waited for ever, or
took the parent's half-run module ("partially initialized module"): its downloads never ran.
:func:`_forget_orphaned_imports` runs in every forked child: such locks are dropped, and the
modules they guarded are imported again, whole, by whoever needs them there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def lazy_names(package: str, namespace: dict, names: Mapping[str, str],
               submodules: tuple[str, ...] = (), hints: Mapping[str, str] | None = None,
               ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` (whose globals are ``namespace``):
    ``names`` maps each lazy name to its module; a name in ``submodules`` is the package's
    submodule of that name; ``hints`` maps a name people guess (a command's) to the one it has."""

    def __getattr__(name: str):
        import importlib

        if name in submodules:
            return importlib.import_module(f"{package}.{name}")  # (the import sets the attribute)
        module = names.get(name)
        if module is None:
            hint = (hints or {}).get(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}"
                                 + (f"; the Python API's is {package}.{hint}()" if hint else ""))
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # found directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names) | set(submodules))

    return __getattr__, __dir__


def _forget_orphaned_imports() -> None:
    """In a forked child: the module locks held by the parent's other threads (gone here) are
    dropped, with the modules they were importing (half run), so the child imports them anew.

    importlib's own bookkeeping (``_module_locks``: name -> weak reference to the lock, whose
    ``owner`` is the importing thread's id; ``_blocking_on``: thread id -> what it waits for),
    the same from Python 3.10 to 3.13; anything else found there is left as it is.
    """
    import sys
    import threading

    try:
        from importlib import _bootstrap

        me = threading.get_ident()
        locks = _bootstrap._module_locks
        for name, ref in list(locks.items()):
            lock = ref()
            owner = getattr(lock, "owner", None)
            if lock is None or owner in (None, 0, me):
                continue
            if locks.get(name) is ref:
                del locks[name]  # (the next import of ``name`` makes a new lock, free)
            module = sys.modules.get(name)
            if module is not None and getattr(getattr(module, "__spec__", None), "_initializing", False):
                del sys.modules[name]  # (half run by a thread the child does not have)
        blocking = _bootstrap._blocking_on
        for tid in list(blocking.keys()):
            if tid != me:
                blocking.pop(tid, None)  # (a dead thread's wait: a new thread with its id is not stuck)
    except Exception:  # noqa: BLE001 - another importlib: the child is left as CPython made it
        pass


def _install() -> None:
    import os

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forget_orphaned_imports)


_install()
