"""``prefetch.model.lean.dataclass``: a record's methods as ``dataclasses`` makes them, with
one compile per class instead of up to six (start-up of a ``get``)."""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import subprocess
import sys

import pytest

from prefetch.model import lean
from tests.origin import OriginServer


def _twins(frozen: bool):
    """The same class decorated by ``dataclasses.dataclass`` and by ``lean.dataclass``."""

    def body(decorate):
        @decorate
        class Rec:
            """A record."""

            a: int
            b: object = None
            hidden: str = dataclasses.field(default="h", repr=False)
            loose: float = dataclasses.field(default=0.0, compare=False)
            unhashed: object = dataclasses.field(default=0, hash=False)
            only_hashed: int = dataclasses.field(default=0, compare=False, hash=True)
            items: list = dataclasses.field(default_factory=list, hash=False)

            @property
            def double(self) -> int:
                return 2 * self.a

        return Rec

    return body(dataclasses.dataclass(frozen=frozen)), body(lean.dataclass(frozen=frozen))


def _values(cls):
    nan = math.nan
    return [
        cls(1),
        cls(1),
        cls(2, b="x"),
        cls(1, hidden="other"),
        cls(1, loose=5.0),
        cls(1, unhashed=3),
        cls(1, only_hashed=9),
        cls(1, b=nan),
        cls(1, b=nan),
        cls(1, b=(1, [2])),
        cls(1, items=[1, 2]),
    ]


@pytest.mark.parametrize("frozen", [False, True])
def test_repr_eq_and_hash_are_the_ones_dataclasses_makes(frozen):
    stock, mine = _twins(frozen)
    ours, theirs = _values(mine), _values(stock)
    assert [repr(x) for x in ours] == [repr(x) for x in theirs]
    assert [[x == y for y in ours] for x in ours] == [[x == y for y in theirs] for x in theirs]
    assert [[x != y for y in ours] for x in ours] == [[x != y for y in theirs] for x in theirs]
    ours_nan, theirs_nan = mine(1, b=math.nan), stock(1, b=math.nan)  # (the one NaN: == as this Python's dataclasses)
    assert (ours_nan == ours_nan) == (theirs_nan == theirs_nan)
    assert (ours_nan == mine(1, b=ours_nan.b)) == (theirs_nan == stock(1, b=theirs_nan.b))
    assert mine(1) != stock(1) and (mine(1) == 1) is False
    assert mine(1).__eq__(1) is NotImplemented and stock(1).__eq__(1) is NotImplemented
    if frozen:
        pairs = [(x, y) for x, y in zip(ours, theirs) if not isinstance(x.b, tuple)]  # (a list inside: unhashable)
        assert [hash(x) for x, _ in pairs] == [hash(y) for _, y in pairs]
        with pytest.raises(TypeError):
            hash(mine(1, b=(1, [2])))
        assert hash(mine(1, unhashed=7)) == hash(stock(1, unhashed=7)) == hash(mine(1))
        assert hash(mine(1, only_hashed=7)) == hash(stock(1, only_hashed=7)) != hash(mine(1))
        with pytest.raises(dataclasses.FrozenInstanceError):
            mine(1).a = 2
    else:
        assert mine.__hash__ is None and stock.__hash__ is None
        with pytest.raises(TypeError):
            hash(mine(1))
    assert [(f.name, f.default, f.repr, f.compare, f.hash) for f in dataclasses.fields(mine)] == [
        (f.name, f.default, f.repr, f.compare, f.hash) for f in dataclasses.fields(stock)]
    assert mine.__match_args__ == stock.__match_args__
    assert dataclasses.replace(mine(1), b=3) == mine(1, b=3) and dataclasses.asdict(mine(1)) == dataclasses.asdict(stock(1))
    assert mine(4).double == 8
    assert str(inspect.signature(mine)) == str(inspect.signature(stock))  # (a factory's default: "<factory>")
    assert mine.__init__.__annotations__ == stock.__init__.__annotations__
    assert repr(mine.__dataclass_params__) == repr(stock.__dataclass_params__)
    assert mine.__doc__ == stock.__doc__
    a, b = mine(1), mine(1)
    assert a.items == [] and a.items is not b.items  # a factory per instance
    for args, kwargs in [((), {}), ((1, 2, 3, 4, 5, 6, 7, 8, 9), {}), ((1,), {"a": 2}), ((1,), {"nope": 2})]:
        with pytest.raises(TypeError) as ours_error:
            mine(*args, **kwargs)
        with pytest.raises(TypeError) as theirs_error:
            stock(*args, **kwargs)
        assert str(ours_error.value) == str(theirs_error.value)
    for change in (lambda r: setattr(r, "a", 5), lambda r: setattr(r, "other", 5), lambda r: delattr(r, "a")):
        errors = []
        for record in (mine(1), stock(1)):
            try:
                change(record)
                errors.append(None)
            except Exception as exc:  # noqa: BLE001
                errors.append((type(exc), str(exc)))
        assert errors[0] == errors[1]
    assert mine.__repr__.__qualname__ == stock.__repr__.__qualname__
    assert mine.__eq__.__qualname__ == stock.__eq__.__qualname__


def test_a_record_inside_itself_and_a_subclass():
    stock, mine = _twins(False)
    x, y = mine(1), stock(1)
    x.items.append(x)
    y.items.append(y)
    assert repr(x).replace(mine.__qualname__, "R") == repr(y).replace(stock.__qualname__, "R")
    assert "items=[...]" in repr(x)

    class Sub(mine):  # (not a dataclass: inherits the methods, as with dataclasses)
        pass

    class StockSub(stock):
        pass

    assert repr(Sub(2)).replace("Sub", "S") == repr(StockSub(2)).replace("StockSub", "S")
    assert Sub(2) == Sub(2) and Sub(2) != mine(2) and (StockSub(2) != stock(2))


def test_what_it_does_not_make_as_dataclasses_is_refused():
    class Own:
        """Its own equality."""

        a: int = 0

        def __eq__(self, other):
            return True

    class Later:
        """A __post_init__."""

        a: int = 0

        def __post_init__(self):
            pass

    class Hidden:
        """A field without init."""

        a: int = dataclasses.field(default=0, init=False)

    class Undocumented:
        a: int = 0

    for cls in (Own, Later, Hidden, Undocumented):
        with pytest.raises(TypeError):
            lean.dataclass(cls)

    def misordered():
        return type("Misordered", (), {"__doc__": "A field without a default after one with.",
                                        "__annotations__": {"a": "int", "b": "int"}, "a": 0})

    with pytest.raises(TypeError) as stock_error:
        dataclasses.dataclass(misordered())
    with pytest.raises(TypeError) as lean_error:  # (the defaults are __init__'s __defaults__: checked, as dataclasses does)
        lean.dataclass(misordered())
    assert str(lean_error.value) == str(stock_error.value)
    with pytest.raises(TypeError):
        lean.dataclass(type("Sub", (lean.dataclass(type("Base", (), {"__doc__": "A base.", "__annotations__": {}})),),
                            {"__doc__": "A subclass."}))


# A plain ``get``: which records it loads, whose methods are lean's, and what dataclasses compiled.
AUDIT = """\
import sys
made = []
sys.addaudithook(lambda event, args: made.append(args[0]) if event == "compile" and isinstance(args[0], bytes)
                 and args[0].startswith((b"def __create_fn__", b"def make(")) else None)
import prefetch.cli
sys.argv[0] = "prefetch"
try:
    prefetch.cli.main()
except SystemExit as exc:
    code = exc.code
import dataclasses
from prefetch.model import lean
records = [c for m in sorted(sys.modules) if m.startswith("prefetch.") for c in vars(sys.modules[m]).values()
           if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == m]
lean_repr = lean._repr_of(()).__code__
print("LEAN=" + ",".join(f"{c.__module__}.{c.__qualname__}" for c in records if c.__repr__.__code__ is lean_repr))
print("STOCK=" + ",".join(f"{c.__module__}.{c.__qualname__}" for c in records if c.__repr__.__code__ is not lean_repr))
print("COMPILED=" + ",".join(s.split(b"def ", 2)[2].split(b"(")[0].decode() if s.startswith(b"def __create_fn__")
                             else "lean" for s in made))
sys.exit(code)
"""


def test_a_get_compiles_one_init_per_record(home, tmp_path):
    """A plain ``get``'s records (about twenty) are ``lean.dataclass`` es: one compile each
    (``__init__``), where ``dataclasses`` compiles up to six (~25 ms of a process for these)."""
    data = os.urandom(10_000)
    out = tmp_path / "r.bin"
    with OriginServer() as origin:
        origin.put("r.bin", data)
        proc = subprocess.run([sys.executable, "-c", AUDIT, "get", origin.url_for("r.bin"), "-o", str(out), "-q"],
                              capture_output=True, text=True, timeout=120, env=os.environ.copy(),
                              stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes() == data
    lines = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    lean_ones, stock = set(lines["LEAN"].split(",")) - {""}, set(lines["STOCK"].split(",")) - {""}
    assert {"prefetch.engine.options.TransferOptions", "prefetch.model.plans.FilePlan", "prefetch.model.plans.FileResult",
            "prefetch.flow.request.GetRequest", "prefetch.model.events.Event", "prefetch.engine.sources.Source",
            "prefetch.model.specs.FileSpec", "prefetch.fs.locks.LockOwner"} <= lean_ones, lean_ones
    assert "prefetch.engine.resume_state.TransferState" in lean_ones and not stock, stock
    compiled = lines["COMPILED"].split(",")
    assert compiled.count("lean") == len(lean_ones), compiled
    assert sorted(compiled) == sorted(["lean"] * len(lean_ones) + ["__init__", "__repr__", "__eq__"] * len(stock)), compiled
