"""Fetch v13-v17 (KIP-516): topics named by id in requests, responses and fetch sessions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, produce_body, request_class

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import build_batch
from tidelog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def w(broker: EmbeddedBroker) -> Iterator[Wire]:
    with Wire(broker) as wire:
        yield wire


def create(w: Wire, name: str, partitions: int = 1) -> uuid.UUID:
    cls = request_class(19, 7)
    tcls = nested(cls, "topics")
    resp: Any = w.call(19, 7, body=make(cls, timeout=10000, validate_only=False, topics=(
        make(tcls, name=name, num_partitions=partitions, replication_factor=1, assignments=(),
             configs=()),)))
    assert resp.topics[0].error_code == 0
    return uuid.UUID(bytes=resp.topics[0].topic_id.bytes)


def delete(w: Wire, name: str) -> None:
    cls = request_class(20, 6)
    tcls = nested(cls, "topics")
    resp: Any = w.call(20, 6, body=make(cls, timeout_ms=10000,
                                        topics=(make(tcls, name=name, topic_id=None),)))
    assert resp.responses[0].error_code == 0


def produce(w: Wire, name: str, n: int, partition: int = 0) -> None:
    batch = build_batch([(1000 + i, None, b"v%d" % i) for i in range(n)])
    resp: Any = w.call(0, 9, body=produce_body(9, name, {partition: batch}))
    assert resp.responses[0].partition_responses[0].error_code == 0


def fetch(
    w: Wire,
    version: int,
    parts: dict[tuple[uuid.UUID, int], int],
    *,
    session_id: int = 0,
    epoch: int = -1,
    forgotten: dict[uuid.UUID, list[int]] | None = None,
) -> Any:
    cls = request_class(1, version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    fcls = nested(cls, "forgotten_topics_data")
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (tid, p), offset in parts.items():
        by_topic.setdefault(tid, []).append(make(
            pcls, partition=p, fetch_offset=offset, partition_max_bytes=1 << 20,
            log_start_offset=-1, current_leader_epoch=-1, last_fetched_epoch=-1))
    body = make(
        cls, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
        session_id=session_id, session_epoch=epoch, rack_id="",
        topics=tuple(make(tcls, topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        forgotten_topics_data=tuple(
            make(fcls, topic_id=t, partitions=tuple(ps)) for t, ps in (forgotten or {}).items()),
    )
    return w.call(1, version, body=body)


def parts_of(resp: Any) -> dict[tuple[uuid.UUID, int], Any]:
    return {(uuid.UUID(bytes=(t.topic_id or uuid.UUID(int=0)).bytes), p.partition_index): p
            for t in resp.responses for p in t.partitions}


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17, 18])
def test_fetch_by_topic_id(w: Wire, version: int) -> None:
    name = f"tid-{version}"
    tid = create(w, name)
    produce(w, name, 3)
    resp = fetch(w, version, {(tid, 0): 0})
    assert resp.error_code == 0
    got = parts_of(resp)
    assert list(got) == [(tid, 0)]
    p = got[(tid, 0)]
    assert (p.error_code, p.high_watermark) == (0, 3)
    assert len(p.records) > 0


def test_unknown_topic_id_answers_per_partition(w: Wire) -> None:
    tid = create(w, "tid-known")
    stranger = uuid.uuid4()
    got = parts_of(fetch(w, 17, {(stranger, 0): 0, (tid, 0): 0}))
    assert got[(stranger, 0)].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert got[(tid, 0)].error_code == ErrorCode.NONE
    zero = parts_of(fetch(w, 13, {(uuid.UUID(int=0), 0): 0}))
    assert [p.error_code for p in zero.values()] == [ErrorCode.UNKNOWN_TOPIC_ID]


def test_session_by_id_is_incremental_and_forgets_by_id(w: Wire) -> None:
    a, b = create(w, "sess-a"), create(w, "sess-b")
    produce(w, "sess-a", 2)
    first = fetch(w, 17, {(a, 0): 0, (b, 0): 0}, epoch=0)
    assert first.session_id != 0
    assert set(parts_of(first)) == {(a, 0), (b, 0)}
    sid = first.session_id
    # nothing changed: an incremental fetch with no partitions answers nothing
    quiet = fetch(w, 17, {(a, 0): 2}, session_id=sid, epoch=1)
    assert (quiet.error_code, parts_of(quiet)) == (0, {})
    produce(w, "sess-b", 1)
    news = fetch(w, 17, {}, session_id=sid, epoch=2)
    assert list(parts_of(news)) == [(b, 0)]
    # b forgotten by id: new records on b are no longer sent
    fetch(w, 17, {}, session_id=sid, epoch=3, forgotten={b: [0]})
    produce(w, "sess-b", 1)
    produce(w, "sess-a", 1)
    after = fetch(w, 17, {}, session_id=sid, epoch=4)
    assert list(parts_of(after)) == [(a, 0)]


def test_a_session_keeps_its_kind_of_topic_naming(w: Wire) -> None:
    a = create(w, "kind-a")
    first = fetch(w, 13, {(a, 0): 0}, epoch=0)
    cls = request_class(1, 12)
    by_name: Any = w.call(1, 12, body=make(
        cls, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=first.session_id, session_epoch=1, rack_id="", topics=(),
        forgotten_topics_data=()))
    assert by_name.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


def test_recreated_topic_in_a_session(w: Wire) -> None:
    old = create(w, "recreated")
    produce(w, "recreated", 2)
    first = fetch(w, 17, {(old, 0): 0}, epoch=0)
    sid = first.session_id
    delete(w, "recreated")
    new = create(w, "recreated")
    assert new != old
    again = parts_of(fetch(w, 17, {}, session_id=sid, epoch=1))
    assert again[(old, 0)].error_code == ErrorCode.INCONSISTENT_TOPIC_ID
    fresh = parts_of(fetch(w, 17, {(new, 0): 0}))
    assert fresh[(new, 0)].error_code == ErrorCode.NONE
