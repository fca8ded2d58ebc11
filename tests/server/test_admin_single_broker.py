"""The admin APIs a Kafka 4.x AdminClient calls, with one broker's semantics:
DescribeTopicPartitions, ListConfigResources, ElectLeaders, partition reassignments,
OffsetForLeaderEpoch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, produce_body, request_class

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import build_batch
from tidelog.testing import EmbeddedBroker

TOPIC_OPS = 3576


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@pytest.fixture
def w(broker: EmbeddedBroker) -> Iterator[Wire]:
    with Wire(broker) as wire:
        yield wire


def create(w: Wire, name: str, partitions: int = 1) -> None:
    cls = request_class(19, 7)
    tcls = nested(cls, "topics")
    resp: Any = w.call(19, 7, body=make(cls, timeout=10000, validate_only=False, topics=(
        make(tcls, name=name, num_partitions=partitions, replication_factor=1, assignments=(),
             configs=()),)))
    assert resp.topics[0].error_code in (0, ErrorCode.TOPIC_ALREADY_EXISTS)


def describe_partitions(w: Wire, names: list[str], limit: int, cursor: Any = None) -> Any:
    cls = request_class(75, 0)
    tcls = nested(cls, "topics")
    ccls = nested(cls, "cursor")
    return w.call(75, 0, body=make(
        cls, topics=tuple(make(tcls, name=n) for n in names), response_partition_limit=limit,
        cursor=None if cursor is None else make(ccls, topic_name=cursor[0],
                                                partition_index=cursor[1])))


def test_describe_topic_partitions_pages_with_a_cursor(w: Wire) -> None:
    create(w, "dtp-a", 3)
    create(w, "dtp-b", 2)
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        resp = describe_partitions(w, ["dtp-b", "dtp-a"], 2, cursor)
        pages += 1
        for t in resp.topics:
            assert (t.error_code, t.topic_authorized_operations) == (0, TOPIC_OPS)
            seen += [(t.name, p.partition_index) for p in t.partitions]
        if resp.next_cursor is None:
            break
        cursor = (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
    assert seen == [("dtp-a", 0), ("dtp-a", 1), ("dtp-a", 2), ("dtp-b", 0), ("dtp-b", 1)]
    assert pages == 3


def test_describe_topic_partitions_unknown_topic(w: Wire) -> None:
    resp = describe_partitions(w, ["no-such-dtp"], 100)
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("no-such-dtp", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert resp.next_cursor is None


def test_list_config_resources(w: Wire, broker: EmbeddedBroker) -> None:
    create(w, "lcr-t")
    v1: Any = w.call(74, 1, resource_types=())
    found = {(r.resource_type, r.resource_name) for r in v1.config_resources}
    assert (2, "lcr-t") in found and (4, str(broker.broker.node_id)) in found
    brokers: Any = w.call(74, 1, resource_types=(4,))
    assert [(r.resource_type, r.resource_name) for r in brokers.config_resources] == [
        (4, str(broker.broker.node_id))]
    bad: Any = w.call(74, 1, resource_types=(3,))
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    v0: Any = w.call(74, 0)
    assert (v0.error_code, v0.config_resources) == (0, ())


def elect(w: Wire, version: int, topics: dict[str, list[int]] | None) -> Any:
    cls = request_class(43, version)
    tcls = nested(cls, "topic_partitions")
    return w.call(43, version, body=make(cls, election_type=0, timeout=10000, topic_partitions=(
        None if topics is None
        else tuple(make(tcls, topic=t, partitions=tuple(ps)) for t, ps in topics.items()))))


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_is_never_needed(w: Wire, version: int) -> None:
    create(w, "elect-t", 2)
    resp = elect(w, version, {"elect-t": [0, 1, 7]})
    [result] = resp.replica_election_results
    assert [(p.partition_id, p.error_code) for p in result.partition_result] == [
        (0, ErrorCode.ELECTION_NOT_NEEDED), (1, ErrorCode.ELECTION_NOT_NEEDED),
        (7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    every = elect(w, version, None)
    assert "elect-t" in {r.topic for r in every.replica_election_results}


def reassign(w: Wire, version: int, replicas: Any, allow: bool = True) -> tuple[int, int]:
    cls = request_class(45, version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    resp: Any = w.call(45, version, body=make(
        cls, timeout=10000, allow_replication_factor_change=allow, topics=(make(
            tcls, name="reassign-t", partitions=(make(pcls, partition_index=0,
                                                       replicas=replicas),)),)))
    return resp.error_code, resp.responses[0].partitions[0].error_code


def test_partition_reassignments(w: Wire, broker: EmbeddedBroker) -> None:
    create(w, "reassign-t")
    node = broker.broker.node_id
    assert reassign(w, 0, (node,)) == (0, 0)
    assert reassign(w, 1, (node + 1,)) == (0, ErrorCode.INVALID_REPLICA_ASSIGNMENT)
    assert reassign(w, 1, (node, node + 1), allow=False) == (
        0, ErrorCode.INVALID_REPLICATION_FACTOR)
    assert reassign(w, 0, None) == (0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)
    listed: Any = w.call(46, 0, timeout=10000, topics=None)
    assert (listed.error_code, listed.topics) == (0, ())


def epoch_end(w: Wire, version: int, topic: str, epoch: int, current: int = -1) -> Any:
    cls = request_class(23, version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    resp: Any = w.call(23, version, body=make(cls, replica_id=-1, topics=(make(
        tcls, topic=topic, partitions=(make(pcls, partition=0, current_leader_epoch=current,
                                            leader_epoch=epoch),)),)))
    return resp.topics[0].partitions[0]


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(w: Wire, version: int) -> None:
    topic = f"ofle-{version}"
    create(w, topic)
    batch = build_batch([(1000 + i, None, b"v") for i in range(4)])
    assert w.call(0, 9, body=produce_body(9, topic, {0: batch})) is not None
    p = epoch_end(w, version, topic, 0)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 4)
    p = epoch_end(w, version, topic, 3)
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, -1, -1)
    assert epoch_end(w, version, topic, 0, current=1).error_code == \
        ErrorCode.UNKNOWN_LEADER_EPOCH
    assert epoch_end(w, version, "no-such-ofle", 0).error_code == \
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
