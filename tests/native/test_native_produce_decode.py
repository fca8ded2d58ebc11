"""_native/produce_decode.c against its twin, protocol/produce_in_place.py: on Produce
requests of every version kio writes (v3-v13: flexible from v9, topic ids from v13), and on
the same frames cut, flipped, extended or with a length lied about, the native decode gives
the twin's objects (records writable views of the same frame) or declines exactly the frames
the twin refuses, which the switch then refuses with the twin's own error."""

from __future__ import annotations

import dataclasses
import os
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_core_support import core, needs_core

from tidelog.client.wire import encode_request
from tidelog.protocol.codec import InvalidRequestError, write_uvarint
from tidelog.protocol.produce_in_place import (
    _header_version,
    decode_produce_in_place,
    decode_produce_in_place_py,
)

pytestmark = [needs_core, pytest.mark.skipif(bool(os.environ.get("TIDELOG_PURE_PYTHON")),
                                          reason="the twins alone: the core is not bound")]
SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, bytes]:
    version = draw(st.integers(3, 13))
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        parts = [{"index": draw(st.integers(-(1 << 31), (1 << 31) - 1)),
                  "records": draw(st.one_of(st.none(), st.binary(max_size=200)))}
                 for _ in range(draw(st.integers(0, 3)))]
        key = ({"topic_id": uuid.UUID(int=draw(st.sampled_from([0, 1, (1 << 128) - 1])
                                               | st.integers(0, (1 << 128) - 1)))}
               if version >= 13 else {"name": draw(st.text(max_size=20))})
        topics.append({**key, "partition_data": parts})
    body = {"transactional_id": draw(st.one_of(st.none(), st.text(max_size=10))),
            "acks": draw(st.sampled_from([-1, 0, 1])),
            "timeout": draw(st.integers(0, (1 << 31) - 1)), "topic_data": topics}
    client = draw(st.one_of(st.none(), st.text(max_size=12)))
    return version, encode_request(0, version, draw(st.integers(-(1 << 31), (1 << 31) - 1)),
                                   client, body)[4:]  # type: ignore[arg-type]


def _lie(buf: bytearray, pos: int, value: int, version: int) -> None:
    """A length written over the bytes at ``pos``, as this version writes lengths."""
    if version >= 9:
        out = bytearray()
        write_uvarint(out, value)
    else:
        out = bytearray(struct.pack(">i", value - (1 << 32) if value >= 1 << 31 else value))
    buf[pos:pos + len(out)] = out


def _same(version: int, buf: bytearray) -> None:
    frame = memoryview(buf)
    native = core.produce_decode(frame, version, _header_version(version))
    try:
        want = decode_produce_in_place_py(memoryview(buf), version)
    except InvalidRequestError as exc:
        assert native is None, f"the twin refuses ({exc}), the native core reads {native}"
        with pytest.raises(InvalidRequestError) as got:
            decode_produce_in_place(frame, version)
        assert str(got.value) == str(exc)
        return
    assert native is not None, "the native core declines a frame its twin reads"
    assert native == want
    assert decode_produce_in_place(memoryview(buf), version) == want  # (the one C call)
    assert type(native[0]) is type(want[0]) and type(native[1]) is type(want[1])
    assert dataclasses.replace(native[1], topic_data=()).acks == want[1].acks  # faults.py
    for t in native[1].topic_data:
        for p in t.partition_data:
            assert p.records is None or (p.records.obj is buf and not p.records.readonly)


@SETTINGS
@given(requests())
def test_valid_requests_decode_alike(req: tuple[int, bytes]) -> None:
    version, frame = req
    _same(version, bytearray(frame))
    assert core.produce_decode(memoryview(bytearray(frame)), version,
                               _header_version(version)) is not None


@SETTINGS
@given(requests(), st.data())
def test_damaged_frames_decode_or_are_refused_alike(req: tuple[int, bytes],
                                                    data: st.DataObject) -> None:
    version, frame = req
    buf = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["flip", "cut", "extend", "lie"]))
        pos = data.draw(st.integers(0, max(0, len(buf) - 1)))
        if kind == "flip" and buf:
            buf[pos] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF])
                                 | st.integers(0, 255))
        elif kind == "cut":
            del buf[pos:]
        elif kind == "extend":
            buf += data.draw(st.binary(min_size=1, max_size=8))
        else:
            _lie(buf, pos, data.draw(st.sampled_from([0, 1, 2, 0x7F, 0x80, (1 << 31) - 1,
                                                      (1 << 32) - 1]) | st.integers(0, 400)),
                 version)
    _same(version, buf)


def test_the_one_call_takes_produces_header_version() -> None:
    """``decode_produce_in_place`` (produce_decode_in_place) reads v9+ with header v2."""
    assert core.produce_decode_in_place is decode_produce_in_place
    for version in range(3, 14):
        assert _header_version(version) == (2 if version >= 9 else 1)


def _frame(version: int, client: str | None, topic: str, corr: int = 7) -> bytearray:
    body = {"transactional_id": None, "acks": -1, "timeout": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": b"x" * 70}]}]}
    return bytearray(encode_request(0, version, corr, client, body)[4:])  # type: ignore[arg-type]


@pytest.mark.parametrize("version", [8, 9])
def test_names_read_again_are_the_frames_own(version: int) -> None:
    """The client id and topic name last read are handed out again only for the same bytes:
    a name of the same length but other bytes, a longer or shorter one, a non-ASCII one,
    then the first again, each decode as the twin decodes them."""
    names = [("client-a", "topic-a"), ("client-b", "topic-b"), ("client-b", "topic-bb"),
             ("c", "t"), ("clïent", "tøpic"), ("clïent", "tøpic"), (None, "topic-a"),
             ("client-a", "topic-a")]
    for i, (client, topic) in enumerate(names):
        buf = _frame(version, client, topic, i)
        header, request = decode_produce_in_place(memoryview(buf), version)
        want_header, want = decode_produce_in_place_py(memoryview(bytearray(buf)), version)
        assert (header, request) == (want_header, want)
        assert (header.client_id, request.topic_data[0].name) == (client, topic)
