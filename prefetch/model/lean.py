"""``dataclass`` with the same ``__repr__``, ``__eq__`` and ``__hash__``, none of them compiled at import.

``dataclasses.dataclass`` writes each generated method as source text and compiles it when
the class is created: for the records a ``get`` imports (20 classes, up to 40 fields), about
15 ms of a process's start on this machine before any of them is used. Here ``__init__`` (and a
frozen class's ``__setattr__``/``__delattr__``) still come from ``dataclasses``; ``__repr__``,
``__eq__`` and a frozen class's ``__hash__`` are the functions below, bound to the class's
fields when it is created: the values ``dataclasses``' own would return (the fields with
``repr=True`` in order, ``...`` for a record inside itself; equal when of the same class and
the compared fields' tuples are equal; the hash of the hashed fields' tuple), and a non-frozen
class unhashable as with ``eq=True``. ``fields()``, ``replace()``, ``asdict()`` and
``__match_args__`` are ``dataclasses``'.
"""

from __future__ import annotations

import dataclasses
from _thread import get_ident


def dataclass(cls=None, /, *, frozen: bool = False):
    """``dataclasses.dataclass(cls, frozen=frozen)`` (``init``, ``repr`` and ``eq`` true), its
    ``__repr__``, ``__eq__`` and ``__hash__`` made without compiling code."""

    def wrap(cls):
        own = {"__repr__", "__eq__", "__hash__"} & set(cls.__dict__)
        if own:  # (dataclasses would keep them: nothing here for such a class)
            raise TypeError(f"{cls.__qualname__} defines {sorted(own)}: use dataclasses.dataclass")
        cls = dataclasses.dataclass(cls, repr=False, eq=False, frozen=frozen)
        fields = dataclasses.fields(cls)
        cls.__repr__ = _named(cls, "__repr__", _repr_of(tuple(f.name for f in fields if f.repr)))
        cls.__eq__ = _named(cls, "__eq__", _eq_of(_values_of(tuple(f.name for f in fields if f.compare))))
        if frozen:
            hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
            cls.__hash__ = _named(cls, "__hash__", _hash_of(_values_of(hashed)))
        else:
            cls.__hash__ = None  # (eq without frozen: unhashable, as dataclasses makes it)
        return cls

    return wrap if cls is None else wrap(cls)


def _named(cls, name: str, fn):
    fn.__name__ = name
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    return fn


def _values_of(names: tuple[str, ...]):
    """A function from a record to the tuple of its ``names`` fields."""

    def values(self) -> tuple:
        return tuple([getattr(self, name) for name in names])

    return values


def _repr_of(names: tuple[str, ...]):
    running: set = set()

    def __repr__(self) -> str:
        key = id(self), get_ident()
        if key in running:
            return "..."
        running.add(key)
        try:
            shown = ", ".join([f"{name}={getattr(self, name)!r}" for name in names])
        finally:
            running.discard(key)
        return f"{self.__class__.__qualname__}({shown})"

    return __repr__


def _eq_of(values):
    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash_of(values):
    def __hash__(self) -> int:
        return hash(values(self))

    return __hash__
