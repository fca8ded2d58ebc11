"""The native slotted maker (util/slotted.py) against its twin, the class itself: for the
classes made per request and for dataclasses and named tuples drawn with random fields and
defaults, the same instance (type, fields, equality, hash of a tuple) for every call the
class takes, the class's own TypeError for every call it refuses, a fresh value from a
default_factory each time, and no maker at all for the classes it must not bind."""

from __future__ import annotations

import dataclasses
import gc
import sys
from collections import namedtuple
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from native_core_support import core, needs_core

from tidelog.protocol.fast import ProducePartitionResult
from tidelog.server.context import RequestContext
from tidelog.storage.log_append import LogAppendInfo
from tidelog.storage.producer_state import BatchMetadata
from tidelog.util.slotted import slotted_maker_py
from tidelog.util.topic_partition import TopicPartition

pytestmark = needs_core
values = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.booleans(),
                   st.tuples(st.integers()))


def _fields(obj: Any) -> tuple[Any, ...]:
    if isinstance(obj, tuple):
        return tuple(obj)
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))


def same_call(cls: type, args: tuple[Any, ...]) -> None:
    maker = core.slotted_maker(cls)
    assert maker is not cls, f"{cls.__name__} is bound"
    twin = slotted_maker_py(cls)
    try:
        want = twin(*args)
    except TypeError as exc:
        with pytest.raises(TypeError) as got:
            maker(*args)
        assert str(got.value) == str(exc)
        return
    got = maker(*args)
    assert type(got) is type(want)
    assert _fields(got) == _fields(want)
    assert got == want
    if isinstance(want, tuple):
        assert hash(got) == hash(want)
        assert repr(got) == repr(want)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([ProducePartitionResult, RequestContext, LogAppendInfo, TopicPartition,
                        BatchMetadata]), st.lists(values, max_size=14))
def test_request_classes(cls: type, args: list[Any]) -> None:
    same_call(cls, tuple(args))


@st.composite
def dataclass_and_args(draw: st.DrawFn) -> tuple[type, tuple[Any, ...]]:
    n = draw(st.integers(0, 8))
    required = draw(st.integers(0, n))
    spec: list[Any] = []
    for i in range(n):
        if i < required:
            spec.append((f"f{i}", Any))
        elif draw(st.booleans()):
            spec.append((f"f{i}", Any, dataclasses.field(default=draw(values))))
        else:
            spec.append((f"f{i}", Any, dataclasses.field(default_factory=list)))
    frozen = draw(st.booleans())
    cls = dataclasses.make_dataclass("Drawn", spec, slots=True, frozen=frozen)
    args = tuple(draw(st.lists(values, max_size=n + 2)))
    return cls, args


@settings(max_examples=300, deadline=None)
@given(dataclass_and_args())
def test_drawn_dataclasses(drawn: tuple[type, tuple[Any, ...]]) -> None:
    cls, args = drawn
    same_call(cls, args)


@st.composite
def namedtuple_and_args(draw: st.DrawFn) -> tuple[type, tuple[Any, ...]]:
    n = draw(st.integers(1, 8))
    defaults = draw(st.lists(values, max_size=n))
    cls = namedtuple("Drawn", [f"f{i}" for i in range(n)], defaults=defaults)
    return cls, tuple(draw(st.lists(values, max_size=n + 2)))


@settings(max_examples=300, deadline=None)
@given(namedtuple_and_args())
def test_drawn_named_tuples(drawn: tuple[type, tuple[Any, ...]]) -> None:
    cls, args = drawn
    same_call(cls, args)


def test_keywords_are_the_class_call() -> None:
    maker = core.slotted_maker(ProducePartitionResult)
    assert maker(3, error_code=7) == ProducePartitionResult(3, 7)
    with pytest.raises(TypeError, match="unexpected keyword"):
        maker(3, nope=1)


def test_a_default_factory_runs_per_call() -> None:
    @dataclasses.dataclass(slots=True)
    class Box:
        items: list[int] = dataclasses.field(default_factory=list)

    maker = core.slotted_maker(Box)
    a, b = maker(), maker()
    assert a.items == [] and a.items is not b.items


@dataclasses.dataclass(slots=True)
class WithPostInit:
    x: int
    seen: bool = False

    def __post_init__(self) -> None:
        self.seen = True


@dataclasses.dataclass(slots=True)
class OwnInit:
    x: int

    def __init__(self, x: int) -> None:
        self.x = x * 2


@dataclasses.dataclass
class Unslotted:
    x: int


@dataclasses.dataclass(slots=True)
class KeywordOnly:
    x: int
    y: int = dataclasses.field(default=0, kw_only=True)


@dataclasses.dataclass(slots=True)
class NotInInit:
    x: int
    y: int = dataclasses.field(default=0, init=False)


@dataclasses.dataclass(slots=True)
class Base:
    x: int


@dataclasses.dataclass(slots=True)
class Derived(Base):
    y: int = 1


class _Pair(NamedTuple):
    a: int
    b: int = 0


class OwnNew(_Pair):
    __slots__ = ()

    def __new__(cls, a: int, b: int = 0) -> OwnNew:
        return super().__new__(cls, a + 1, b)


class Slotted:
    __slots__ = ("x",)

    def __init__(self, x: int) -> None:
        self.x = x


@pytest.mark.parametrize("cls", [WithPostInit, OwnInit, Unslotted, KeywordOnly, NotInInit,
                                 OwnNew, Slotted, int, tuple])
def test_classes_it_does_not_bind(cls: type) -> None:
    assert core.slotted_maker(cls) is cls


def test_a_subclass_dataclass_is_made_whole() -> None:
    maker = core.slotted_maker(Derived)
    assert maker(1) == Derived(1) and maker(1, 2) == Derived(1, 2)


@pytest.mark.parametrize("cls", [TopicPartition, ProducePartitionResult])
def test_no_reference_is_leaked(cls: type) -> None:
    maker = core.slotted_maker(cls)
    value = object()
    before = sys.getrefcount(value)
    for _ in range(100):
        made = maker(value, 1)
        assert made[0] is value if isinstance(made, tuple) else made.index is value
    del made
    gc.collect()
    assert sys.getrefcount(value) == before


def test_a_named_tuple_of_atoms_is_not_tracked_by_the_cycle_collector() -> None:
    maker = core.slotted_maker(BatchMetadata)
    assert not gc.is_tracked(maker(1, 2, 3, 4))  # (ints only: CPython's own rule for tuples)
    assert not gc.is_tracked(core.slotted_maker(_Pair)(1))  # (the default, an int)
    assert gc.is_tracked(maker(1, 2, 3, []))  # a container: the collector must see it


def test_a_cycle_through_a_made_named_tuple_is_collected() -> None:
    maker = core.slotted_maker(_Pair)
    box: list[Any] = []
    pair = maker(1, box)
    box.append(pair)  # pair -> box -> pair: only the cycle collector frees it
    gc.collect()
    gc.disable()
    try:
        del pair, box
        assert gc.collect() >= 2  # (the pair and its list, unreachable but for each other)
    finally:
        gc.enable()
