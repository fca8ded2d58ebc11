"""Produce v11-v13 at the wire: v13 names topics by id (KIP-516); a produce by id lands in the
topic a fetch by name reads, an unknown id is UNKNOWN_TOPIC_ID."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, fetch_body, request_class

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


def create(w: Wire, name: str) -> uuid.UUID:
    cls = request_class(19, 7)
    tcls = nested(cls, "topics")
    resp: Any = w.call(19, 7, body=make(cls, timeout=10000, validate_only=False, topics=(
        make(tcls, name=name, num_partitions=1, replication_factor=1, assignments=(),
             configs=()),)))
    assert resp.topics[0].error_code == 0
    return uuid.UUID(bytes=resp.topics[0].topic_id.bytes)


def produce(w: Wire, version: int, topic: str | uuid.UUID, n: int) -> Any:
    cls = request_class(0, version)
    tcls = nested(cls, "topic_data")
    pcls = nested(tcls, "partition_data")
    batch = build_batch([(1000 + i, None, b"v%d" % i) for i in range(n)])
    body = make(cls, transactional_id=None, acks=-1, timeout=30000, topic_data=(make(
        tcls, name=topic, topic_id=topic,
        partition_data=(make(pcls, index=0, records=batch),)),))
    resp: Any = w.call(0, version, body=body)
    return resp.responses[0]


@pytest.mark.parametrize("version", [11, 12, 13])
def test_produce_new_versions(w: Wire, version: int) -> None:
    name = f"pv-{version}"
    tid = create(w, name)
    first = produce(w, version, tid if version >= 13 else name, 3)
    if version >= 13:
        assert uuid.UUID(bytes=first.topic_id.bytes) == tid
    part = first.partition_responses[0]
    assert (part.error_code, part.base_offset) == (0, 0)
    fetched: Any = w.call(1, 12, body=fetch_body(12, name, {0: 0}))
    assert fetched.responses[0].partitions[0].high_watermark == 3


def test_produce_to_an_unknown_topic_id(w: Wire) -> None:
    stranger = uuid.uuid4()
    resp = produce(w, 13, stranger, 1)
    assert uuid.UUID(bytes=resp.topic_id.bytes) == stranger
    assert [p.error_code for p in resp.partition_responses] == [ErrorCode.UNKNOWN_TOPIC_ID]
