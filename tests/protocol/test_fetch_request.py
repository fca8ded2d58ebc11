"""The columnar decoder of a consumer's sessionless Fetch reads what kio reads, and declines
(None: kio decides) every other shape."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.protocol import fetch_request
from tidelog.protocol.codec import decode_request, request_class
from tidelog.protocol.fetch_request import SessionlessFetch, decode_sessionless_fetch
from tidelog.protocol.kio_util import make, nested
from tidelog.testing.capability import require_capability

VERSIONS = range(4, 19)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)


def frame(version: int, body: Any) -> bytes:
    """The request without its size prefix, as the connection hands it over."""
    import io

    from kio.serial import entity_writer

    cls = request_class(1, version)
    hdr = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(hdr)(buf, hdr(request_api_key=1, request_api_version=version,
                                correlation_id=9, client_id="c"))
    entity_writer(cls)(buf, body)
    return buf.getvalue()


def body(version: int, topics: list[tuple[str, list[tuple[int, int, int, int]]]], *,
         replica_id: int = -1, session: tuple[int, int] = (0, -1), forgotten: bool = False,
         max_wait: int = 500, isolation: int = 0, rack: str = "r1",
         directory: uuid.UUID | None = None) -> Any:
    cls = request_class(1, version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    fcls = nested(cls, "forgotten_topics_data") if version >= 7 else None
    ids = {name: uuid.uuid5(uuid.NAMESPACE_DNS, name) for name, _ in topics}
    extra: dict[str, Any] = {} if directory is None else {"replica_directory_id": directory}
    return make(
        cls, replica_id=replica_id, max_wait=datetime.timedelta(milliseconds=max_wait),
        min_bytes=1, max_bytes=52428800, isolation_level=isolation, session_id=session[0],
        session_epoch=session[1], rack_id=rack,
        forgotten_topics_data=(make(fcls, topic="f", topic_id=uuid.UUID(int=7),
                                    partitions=(1,)),) if forgotten and fcls else (),
        topics=tuple(make(tcls, topic=name, topic_id=ids[name], partitions=tuple(
            make(pcls, partition=p, current_leader_epoch=e, fetch_offset=o,
                 partition_max_bytes=m, log_start_offset=-1, last_fetched_epoch=-1, **extra)
            for p, e, o, m in parts)) for name, parts in topics))


def same_as_kio(version: int, data: bytes) -> None:
    ours = decode_sessionless_fetch(data, version)
    assert ours is not None
    header, req = ours
    kio_header, kio_req = decode_request(data)
    assert header == kio_header
    assert isinstance(req, SessionlessFetch)
    for name, absent in (("max_wait", None), ("min_bytes", None), ("max_bytes", None),
                         ("session_id", 0), ("session_epoch", -1)):
        assert getattr(req, name) == getattr(kio_req, name, absent), name
    assert req.isolation_level == getattr(kio_req, "isolation_level", 0)
    assert req.rack_id == getattr(kio_req, "rack_id", None)
    assert len(req.topics) == len(kio_req.topics)
    for t, kt in zip(req.topics, kio_req.topics, strict=True):
        if version >= 13:
            assert t.topic_id == kt.topic_id
        else:
            assert t.topic == kt.topic
        for p, kp in zip(t.partitions, kt.partitions, strict=True):  # the version's fields
            assert p._fields == tuple(f.name for f in dataclasses.fields(kp))
            assert tuple(p) == tuple(getattr(kp, f) for f in p._fields)
        assert list(t.partition_ids) == [p.partition for p in kt.partitions]
        assert list(t.offsets) == [p.fetch_offset for p in kt.partitions]
        assert list(t.max_bytes) == [p.partition_max_bytes for p in kt.partitions]
        assert list(t.epochs) == [getattr(p, "current_leader_epoch", -1) for p in kt.partitions]


@settings(max_examples=25, deadline=None)
@given(version=st.sampled_from(VERSIONS),
       parts=st.lists(st.tuples(st.integers(0, 2**31 - 1), I32, I64, I32), min_size=1,
                      max_size=40, unique_by=lambda p: p[0]),
       names=st.lists(st.text("abc-_.", min_size=1, max_size=8), min_size=1, max_size=3,
                      unique=True))
def test_the_columns_are_what_kio_reads(version: int, parts: list[tuple[int, int, int, int]],
                                        names: list[str]) -> None:
    topics = [(n, parts[i::len(names)]) for i, n in enumerate(names)]
    topics = [(n, p) for n, p in topics if p]
    same_as_kio(version, frame(version, body(version, topics)))


@pytest.mark.parametrize("version", VERSIONS)
def test_librdkafkas_shape_at_every_version(version: int) -> None:
    parts = [(p, 3, 1000 + p, 1 << 20) for p in range(300)]
    same_as_kio(version, frame(version, body(version, [("orders", parts), ("x", parts[:2])])))


@pytest.mark.parametrize("version", VERSIONS)
def test_other_shapes_are_left_to_kio(version: int) -> None:
    parts = [(0, -1, 0, 100), (1, -1, 5, 100)]
    declined = [
        body(version, [("t", parts), ("t", parts)]),  # a topic twice
        body(version, [("t", parts + parts[:1])]),  # a partition twice
        body(version, [("t", [])]),  # a topic with no partition
    ]
    if version < 15:
        declined.append(body(version, [("t", parts)], replica_id=2))  # a follower
    if version >= 7:
        declined += [body(version, [("t", parts)], session=(0, 0)),  # opens a session
                     body(version, [("t", parts)], session=(77, 3)),
                     body(version, [("t", parts)], forgotten=True)]
    if version >= 17:  # a partition's tagged field
        declined.append(body(version, [("t", parts)], directory=uuid.UUID(int=5)))
    for b in declined:
        assert decode_sessionless_fetch(frame(version, b), version) is None
    good = frame(version, body(version, [("t", parts)]))
    assert decode_sessionless_fetch(good, version) is not None
    assert decode_sessionless_fetch(good + b"\x00", version) is None  # bytes after the body
    for cut in (len(good) - 1, len(good) - 20, 20):
        assert decode_sessionless_fetch(good[:cut], version) is None


def test_versions_outside_the_range_are_left_to_kio() -> None:
    data = frame(4, body(4, [("t", [(0, -1, 0, 1)])]))
    assert decode_sessionless_fetch(data, 3) is None
    assert decode_sessionless_fetch(struct.pack(">hhi", 1, 19, 1) + b"\x00\x00", 19) is None


@settings(max_examples=200, deadline=None)
@given(ids=st.lists(st.one_of(st.integers(0, 40), I32), max_size=30),
       size=st.sampled_from([16, 24, 28, 33]))
def test_the_native_distinct_check_answers_as_its_twin(ids: list[int], size: int) -> None:
    """fetch_ids_distinct (C) agrees with ids_distinct_py wherever it answers (None: an index
    it leaves to Python's set, negative or huge), on entries of every version's size."""
    core = _core()
    raw = b"".join(struct.pack(">i", p) + bytes(size - 4) for p in ids)
    ours = core.fetch_ids_distinct(raw, size)
    theirs = fetch_request.ids_distinct_py(raw, size)
    assert theirs == (len(set(ids)) == len(ids))
    assert ours is None or ours == theirs
    if all(0 <= p < 1 << 20 for p in ids):
        assert ours is not None


def _core() -> Any:
    try:
        core: Any = importlib.import_module("tidelog._native._core")
    except ImportError:
        core = None
    require_capability("native core", core is not None, "build it: setup.py build_ext")
    return core
