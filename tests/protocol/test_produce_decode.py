"""Every Produce frame is decoded by protocol/produce_in_place.py: on random requests of
every version it reads what kio reads, and any damaged frame either decodes or is refused
with InvalidRequestError (never another exception, never a length taken on trust)."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.client.wire import encode_request
from tidelog.protocol.codec import InvalidRequestError, decode_request
from tidelog.protocol.produce_in_place import decode_produce_in_place

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, bytes]:
    version = draw(st.integers(3, 13))
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        parts = [{"index": draw(st.integers(-1, 1 << 20)),
                  "records": draw(st.one_of(st.none(), st.binary(max_size=300)))}
                 for _ in range(draw(st.integers(0, 3)))]
        key = ({"topic_id": uuid.UUID(int=draw(st.integers(0, (1 << 128) - 1)))}
               if version >= 13 else {"name": draw(st.text(min_size=1, max_size=20))})
        topics.append({**key, "partition_data": parts})
    body = {"transactional_id": draw(st.one_of(st.none(), st.text(max_size=10))),
            "acks": draw(st.sampled_from([-1, 0, 1, 2])),
            "timeout": draw(st.integers(0, 1 << 30)), "topic_data": topics}
    client = draw(st.one_of(st.none(), st.text(max_size=12)))
    return version, encode_request(0, version, 7, client, body)[4:]  # type: ignore[arg-type]


@SETTINGS
@given(requests())
def test_reads_what_kio_reads(req: tuple[int, bytes]) -> None:
    version, frame = req
    want_header, want = decode_request(frame)
    header, got = decode_produce_in_place(memoryview(bytearray(frame)), version)
    assert header == want_header
    assert (got.transactional_id, got.acks, got.timeout) == (
        want.transactional_id, want.acks, want.timeout)
    assert len(got.topic_data) == len(want.topic_data)
    for g, w in zip(got.topic_data, want.topic_data, strict=True):
        assert (g.topic_id if version >= 13 else g.name) == (
            w.topic_id if version >= 13 else w.name)
        assert [(p.index, None if p.records is None else bytes(p.records))
                for p in g.partition_data] == [(p.index, p.records) for p in w.partition_data]


@SETTINGS
@given(requests(), st.data())
def test_a_damaged_frame_decodes_or_is_refused(req: tuple[int, bytes], data: st.DataObject
                                               ) -> None:
    version, frame = req
    buf = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["set", "truncate", "extend"]))
        pos = data.draw(st.integers(0, max(0, len(buf) - 1)))
        if kind == "set" and buf:
            buf[pos] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, 0x01]))
        elif kind == "truncate":
            del buf[pos:]
        else:
            buf += data.draw(st.binary(min_size=1, max_size=8))
    try:
        _, got = decode_produce_in_place(memoryview(buf), version)
    except InvalidRequestError:
        return
    for t in got.topic_data:  # what was read lies within the frame
        for p in t.partition_data:
            assert p.records is None or p.records.obj is buf
