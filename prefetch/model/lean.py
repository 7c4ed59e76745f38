"""``dataclass`` with the methods ``dataclasses`` makes, for less of a process's start.

``dataclasses.dataclass`` writes each method it makes as source text and compiles it when the
class is created: ``__init__``, ``__repr__``, ``__eq__``, a frozen class's ``__hash__``,
``__setattr__`` and ``__delattr__``. For the records a ``get`` imports (19 classes, up to 40
fields) that was 96 compiles before any of them is used. Here ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` are the functions below, bound to the
class's fields when it is created (no compile), and ``__init__`` is one compile of a shorter
text. The same values and errors as ``dataclasses``' own: the fields with ``repr=True`` in
order, ``...`` for a record inside itself; equal when of the same class and the compared
fields are, compared as this Python's ``dataclasses`` compares them; the hash of the hashed
fields' tuple; a non-frozen class unhashable as with ``eq=True``; ``FrozenInstanceError`` on a
frozen class's assignment; the same ``__init__`` signature, defaults and factories.
``fields()``, ``replace()``, ``asdict()``, ``__match_args__`` and ``__dataclass_params__`` read
as for ``dataclasses.dataclass(frozen=...)``. Only plain records: no ``__post_init__``,
``InitVar``, ``kw_only``, ``init=False`` field or dataclass base (``dataclasses.dataclass``
for those).
"""

from __future__ import annotations

import dataclasses
import sys
from _thread import get_ident
from operator import attrgetter

_FIELD_BY_FIELD = sys.version_info >= (3, 13)  # how dataclasses' __eq__ compares (3.13 changed it)


def dataclass(cls=None, /, *, frozen: bool = False):
    """``dataclasses.dataclass(cls, frozen=frozen)``, its methods made with one compile (``__init__``)."""

    def wrap(cls):
        _refuse_unless_plain(cls)
        cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=False)
        fields = dataclasses.fields(cls)
        names = tuple(f.name for f in fields)
        cls.__init__ = _named(cls, "__init__", _init_of(cls, fields, frozen))
        cls.__repr__ = _named(cls, "__repr__", _repr_of(tuple(f.name for f in fields if f.repr)))
        compared = tuple(f.name for f in fields if f.compare)
        cls.__eq__ = _named(cls, "__eq__", _eq_of(_values_of(compared), compared))
        if frozen:
            hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
            cls.__hash__ = _named(cls, "__hash__", _hash_of(_values_of(hashed)))
            cls.__setattr__ = _named(cls, "__setattr__", _frozen_setattr_of(cls, names))
            cls.__delattr__ = _named(cls, "__delattr__", _frozen_delattr_of(cls, names))
        else:
            cls.__hash__ = None  # (eq without frozen: unhashable, as dataclasses makes it)
        params = cls.__dataclass_params__
        params.init = params.repr = params.eq = True
        params.frozen = frozen
        return cls

    return wrap if cls is None else wrap(cls)


def _refuse_unless_plain(cls) -> None:
    """What this ``dataclass`` does not make as ``dataclasses`` would: refused."""
    own = {"__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__post_init__"}
    own &= set(cls.__dict__)
    bases = [b for b in cls.__mro__[1:] if hasattr(b, "__dataclass_fields__")]
    notes = cls.__dict__.get("__annotations__", {})
    special = [name for name, note in notes.items() if isinstance(note, str) and note.startswith(
        ("InitVar", "dataclasses.InitVar", "KW_ONLY", "dataclasses.KW_ONLY"))]
    special += [name for name in notes if isinstance(cls.__dict__.get(name), dataclasses.Field)
                and (not cls.__dict__[name].init or cls.__dict__[name].kw_only is True)]
    if own or bases or special or not cls.__doc__:
        raise TypeError(f"{cls.__qualname__}: not a plain record ({sorted(own) or bases or special or 'no docstring'}): "
                        "use dataclasses.dataclass")


class _Factory:
    """The default of a field with a ``default_factory`` in ``__init__``'s signature (as ``dataclasses``')."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _init_of(cls, fields, frozen: bool):
    """``__init__`` taking each field in order, with its default or factory: one compile.

    The defaults are the function's ``__defaults__``, set after the compile, not names in
    its text (a shorter text: a quarter less to compile for a record of many defaults)."""
    given = {"_set": object.__setattr__, "_F": _FACTORY}
    params, lines, defaults = [], [], []
    for i, f in enumerate(fields):
        value = f.name
        if f.default is not dataclasses.MISSING:
            defaults.append(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            given[f"_f{i}"] = f.default_factory
            defaults.append(_FACTORY)
            value = f"_f{i}() if {f.name} is _F else {f.name}"
        elif defaults:  # (what dataclasses refuses, and what the text with defaults could not compile)
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
        params.append(f.name)
        lines.append(f"  _set(self, {f.name!r}, {value})" if frozen else f"  self.{f.name} = {value}")
    if {f.name for f in fields} & (set(given) | {"self"}):
        raise TypeError(f"{cls.__qualname__}: a field named as __init__'s own names: use dataclasses.dataclass")
    text = (f"def make({', '.join(given)}):\n def __init__(self, {', '.join(params)}):\n" + "\n".join(lines)
            + "\n  return None\n return __init__")
    module = sys.modules.get(cls.__module__)
    made: dict = {}
    exec(text, module.__dict__ if module is not None else {}, made)  # noqa: S102 - our own text, as dataclasses'
    init = made["make"](**given)
    init.__defaults__ = tuple(defaults) or None
    init.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    return init


def _frozen_setattr_of(cls, names: tuple[str, ...]):
    def __setattr__(self, name, value):
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    return __setattr__


def _frozen_delattr_of(cls, names: tuple[str, ...]):
    def __delattr__(self, name):
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __delattr__


def _named(cls, name: str, fn):
    fn.__name__ = name
    fn.__qualname__ = f"{cls.__qualname__}.{name}"
    return fn


def _values_of(names: tuple[str, ...]):
    """A function from a record to the tuple of its ``names`` fields."""
    if len(names) > 1:
        return attrgetter(*names)  # (a tuple of them, in C)
    if names:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return lambda self: ()


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


def _eq_of(values, names: tuple[str, ...]):
    if _FIELD_BY_FIELD:  # Python 3.13's: the same record is equal; else each field's == in turn, the first false one
        def __eq__(self, other):
            if self is other:
                return True
            if other.__class__ is self.__class__:
                result = True
                for name in names:
                    result = getattr(self, name) == getattr(other, name)
                    if not result:
                        return result
                return result
            return NotImplemented

        return __eq__

    def __eq__(self, other):  # (up to 3.12: the tuples, whose == takes an element's identity as equal)
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented

    return __eq__


def _hash_of(values):
    def __hash__(self) -> int:
        return hash(values(self))

    return __hash__
