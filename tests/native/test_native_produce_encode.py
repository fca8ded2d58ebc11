"""_native/produce_encode.c against kio's writer and its twin (protocol/fast.py
encode_produce_response_py): random Produce responses of every version (v3-v13: flexible
from v9, topic ids from v13) come out byte for byte as kio writes them, and what the twin
refuses (a field out of its type's range) the native encoder declines."""

from __future__ import annotations

import os
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from native_core_support import core, needs_core

from tidelog.protocol.codec import encode_response, response_class
from tidelog.protocol.fast import (
    ProducePartitionResult,
    encode_produce_response,
    encode_produce_response_py,
)
from tidelog.protocol.kio_util import make, nested

pytestmark = [needs_core, pytest.mark.skipif(bool(os.environ.get("TIDELOG_PURE_PYTHON")),
                                          reason="the twins alone: the core is not bound")]
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
ERRORS = st.sampled_from(sorted(int(e) for e in ErrorCode))  # what kio can write
APPEND_TIME = st.one_of(st.just(-1), st.integers(0, 1 << 45))  # a datetime in kio
TEXT = st.one_of(st.none(), st.text(max_size=30))
Topics = list[tuple[str | uuid.UUID, list[ProducePartitionResult]]]


@st.composite
def responses(draw: st.DrawFn) -> tuple[int, Topics]:
    version = draw(st.integers(3, 13))
    topics: Topics = []
    for _ in range(draw(st.integers(0, 3))):
        parts = [ProducePartitionResult(
            draw(I32), draw(ERRORS), draw(I64), draw(APPEND_TIME), draw(I64) if version >= 5 else -1,
            draw(st.lists(st.tuples(I32, TEXT), max_size=3)) if version >= 8 else (),
            draw(TEXT) if version >= 8 else None) for _ in range(draw(st.integers(0, 3)))]
        key: str | uuid.UUID = (uuid.UUID(int=draw(st.integers(0, (1 << 128) - 1)))
                                if version >= 13 else draw(st.text(max_size=20)))
        topics.append((key, parts))
    return version, topics


def _kio(correlation_id: int, version: int, topics: Topics, throttle: int) -> bytes:
    cls = response_class(0, version)
    tcls = nested(cls, "responses")
    pcls = nested(tcls, "partition_responses")
    ecls = nested(pcls, "record_errors") if version >= 8 else None
    return encode_response(correlation_id, make(cls, throttle_time=throttle, responses=tuple(
        make(tcls, name=key, topic_id=key, partition_responses=tuple(
            make(pcls, index=p.index, error_code=p.error_code, base_offset=p.base_offset,
                 log_append_time=p.log_append_time, log_start_offset=p.log_start_offset,
                 error_message=p.error_message, record_errors=tuple(
                     make(ecls, batch_index=i, batch_index_error_message=m)
                     for i, m in p.record_errors) if ecls else ())
            for p in parts))
        for key, parts in topics)))


@SETTINGS
@given(responses(), I32, st.integers(0, (1 << 31) - 1))
def test_responses_are_what_kio_writes(resp: tuple[int, Topics], correlation_id: int,
                                       throttle: int) -> None:
    version, topics = resp
    native = core.produce_response(correlation_id, version, topics, throttle)
    assert native == _kio(correlation_id, version, topics, throttle)
    assert native == encode_produce_response_py(correlation_id, version, topics, throttle)
    assert encode_produce_response is core.encode_produce_response  # (the one C call)
    assert encode_produce_response(correlation_id, version, topics, throttle) == native
    assert encode_produce_response(correlation_id, version, topics) == \
        encode_produce_response_py(correlation_id, version, topics)  # (no throttle: 0)


@SETTINGS
@given(responses(), st.sampled_from(["index", "error_code", "base_offset", "log_append_time"]),
       st.sampled_from([1 << 70, -(1 << 70), 1 << 40]))
def test_what_the_twin_refuses_is_declined(resp: tuple[int, Topics], field: str,
                                           value: int) -> None:
    version, topics = resp
    parts = [p for _, ps in topics for p in ps]
    if not parts:
        return
    setattr(parts[0], field, value)
    if field in ("base_offset", "log_append_time") and abs(value) < 1 << 63:
        return
    assert core.produce_response(7, version, topics, 0) is None
    with pytest.raises(struct.error) as want:
        encode_produce_response_py(7, version, topics, 0)
    with pytest.raises(struct.error) as got:
        encode_produce_response(7, version, topics, 0)
    assert str(got.value) == str(want.value)


class _Plain:
    """A result without slots (its fields in its __dict__)."""

    def __init__(self, p: ProducePartitionResult) -> None:
        for name in ProducePartitionResult.__slots__:
            setattr(self, name, getattr(p, name))


class _Derived(ProducePartitionResult):
    """A slotted result whose base offset is a property: read through it, not at its slot."""

    @property  # type: ignore[override]
    def base_offset(self) -> int:
        return 12345

    @base_offset.setter
    def base_offset(self, value: int) -> None: ...


def _as(kind: int, p: ProducePartitionResult) -> object:
    if kind == 0:
        return p
    if kind == 1:
        return _Plain(p)
    derived = _Derived(p.index)
    for name in ProducePartitionResult.__slots__:
        if name != "base_offset":
            setattr(derived, name, getattr(p, name))
    return derived


@SETTINGS
@given(responses(), st.lists(st.integers(0, 2), min_size=12, max_size=12))
def test_results_of_other_classes_are_read_as_python_reads_them(
        resp: tuple[int, Topics], kinds: list[int]) -> None:
    """The encoder reads a slotted result's fields at their slots only while its class is
    the one it learned: results of other classes, mixed in one response (no slots, a property
    over a slot), come out as the twin writes them."""
    version, topics = resp
    i = iter(kinds * 2)
    mixed = [(key, [_as(next(i), p) for p in parts]) for key, parts in topics]
    assert core.produce_response(3, version, mixed, 0) == \
        encode_produce_response_py(3, version, mixed, 0)  # type: ignore[arg-type]


def test_a_missing_field_is_declined() -> None:
    p = ProducePartitionResult(0)
    del p.error_code
    assert core.produce_response(3, 9, [("t", [p])], 0) is None
    with pytest.raises(AttributeError):
        encode_produce_response_py(3, 9, [("t", [p])], 0)
