"""The native calls' attribute reads (_native/attr_hint.c and attr_hint.h: a slot at its
offset, an instance dict's entry where the name was found last, the generic lookup
otherwise) against their twin, getattr: random objects of slotted, plain and wide classes
(a wide one's instance dict shares no keys) whose attributes are set and deleted and whose
classes change under the hints (a class attribute, a property shadowing the instance's
value), each read four ways (the value, its truth, whether it is None, as an int)."""

from __future__ import annotations

import operator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog._native import core

pytestmark = pytest.mark.skipif(core is None, reason="native core not built")

NAMES = ["a", "b", "c", "p", "k", "x0", "x39", "missing"]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                   st.integers(-(2**31), 2**31), st.text(max_size=2), st.just([]),
                   st.just([1]))


def _classes() -> list[type]:
    """Fresh classes each example (their changes stay in it)."""

    class Slotted:
        __slots__ = ("a", "b", "c")

    class Plain:
        k = 5

        def __init__(self) -> None:
            self.a = 1
            self.b = None

        @property
        def p(self) -> Any:
            return self.a

    class Wide:
        def __init__(self) -> None:
            for i in range(40):
                setattr(self, f"x{i}", i)

    return [Slotted, Plain, Wide]


def _twin(o: object, name: str, how: int) -> Any:
    v = getattr(o, name)
    if how == 1:
        return bool(v)
    if how == 2:
        return v is None
    if how == 3:
        n = operator.index(v)
        if not -(2**63) <= n < 2**63:
            raise OverflowError("too big for a long long")
        return n
    return v


def _outcome(f: Any, *args: Any) -> tuple[str, Any]:
    try:
        return "value", f(*args)
    except (AttributeError, TypeError, OverflowError) as e:
        return type(e).__name__, None


OPS = st.lists(st.tuples(st.sampled_from(["set", "del", "read", "class", "property"]),
                         st.integers(0, 5), st.sampled_from(NAMES), VALUES),
               min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_reads_are_getattrs(ops: list[tuple[str, int, str, Any]]) -> None:
    classes = _classes()
    objects = [cls() for cls in classes for _ in range(2)]
    for op, which, name, value in ops:
        o = objects[which]
        if op == "set":
            _outcome(setattr, o, name, value)
        elif op == "del":
            _outcome(delattr, o, name)
        elif op == "class":  # the type changed: its version tag with it
            setattr(type(o), name, value)
        elif op == "property" and name != "k":  # a data descriptor over the instance's
            setattr(type(o), name, property(lambda self, v=value: v))
        for how in range(4):
            got = _outcome(core.attr_hint_read, o, name, how)
            want = _outcome(_twin, o, name, how)
            assert got[0] == want[0], (op, name, how, got, want)
            if how == 0:
                assert got[1] is want[1], (op, name, got, want)
            else:
                assert got[1] == want[1], (op, name, how, got, want)
