"""A package's names loaded from their modules on first access (PEP 562).

``prefetch`` and ``prefetch.jobs`` are imported by processes that use few of their names (a
command line, the ``get -b`` launcher, a background worker); each name is imported from its
module the first time it is read, then found directly.
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
