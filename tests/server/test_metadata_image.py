"""The handlers answer from the metadata image and the partitions' leader epochs, over a real
socket: Metadata, DescribeCluster and FindCoordinator report what the image registers (an
UpdateMetadata-style delta applied to the broker's cache), and ListOffsets,
OffsetForLeaderEpoch, Fetch and Produce follow a partition's leader epoch once a LeaderAndIsr
moved it."""

from __future__ import annotations

from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import pytest
from broker_wire import Wire, produce_body

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import RecordBatch, build_batch
from tidelog.server.cluster.partition_state import LeaderAndIsrPartitionState
from tidelog.server.coordinator.group.records import OFFSETS_TOPIC, partition_for
from tidelog.server.metadata.cache import UpdateMetadataDelta
from tidelog.server.metadata.image import BrokerInfo, PartitionRegistration
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

GROUP = "image-group"


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"broker.rack": "rack-a", "offsets.topic.num.partitions": "4"},
                        log_dir=tmp_path) as b:
        yield b


@pytest.fixture
def w(broker: EmbeddedBroker) -> Iterator[Wire]:
    with Wire(broker) as wire:
        yield wire


def metadata(w: Wire, names: list[str]) -> Any:
    cls = request_class(3, 12)
    tcls = nested(cls, "topics")
    return w.call(3, 12, body=make(cls, topics=tuple(make(tcls, name=n) for n in names),
                                   allow_auto_topic_creation=True))


def find_coordinator(w: Wire) -> Any:
    resp: Any = w.call(10, 4, key_type=0, coordinator_keys=(GROUP,))
    return resp.coordinators[0]


def test_one_broker_registration_and_leader_epoch(broker: EmbeddedBroker, w: Wire) -> None:
    node = broker.broker.node_id
    first: Any = metadata(w, ["img"])  # auto-created with one partition
    assert [(b.node_id, b.rack, b.port) for b in first.brokers] == [(node, "rack-a", broker.port)]
    assert first.controller_id == node
    p = first.topics[0].partitions[0]
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas) == \
        (node, 0, (node,), (node,), ())
    # a LeaderAndIsr makes this broker leader again at epoch 4
    state = LeaderAndIsrPartitionState("img", 0, 1, node, 4, (node,), 4, (node,))

    async def bump() -> Any:
        rm = broker.broker.replica_manager
        return rm.become_leader_or_follower(node, 1, [state], {})

    assert broker.run(bump()).errors[TopicPartition("img", 0)] == ErrorCode.NONE
    after: Any = metadata(w, ["img"])
    assert after.topics[0].partitions[0].leader_epoch == 4
    # appends carry the leader epoch
    assert w.call(0, 9, body=produce_body(9, "img", {0: build_batch([(1, None, b"v")])}))
    assert broker.broker.replica_manager.partitions[TopicPartition("img", 0)] \
        .log.leader_epoch_cache.latest_epoch() == 4
    fetched = fetch(w, "img", current_leader_epoch=4)
    assert fetched.error_code == 0
    assert RecordBatch(memoryview(bytes(fetched.records))).partition_leader_epoch == 4


def fetch(w: Wire, topic: str, current_leader_epoch: int) -> Any:
    cls = request_class(1, 12)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    body = make(cls, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1, topics=(make(
                    tcls, topic=topic, partitions=(make(
                        pcls, partition=0, current_leader_epoch=current_leader_epoch,
                        fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                        partition_max_bytes=1 << 20),)),),
                forgotten_topics_data=(), rack_id="")
    resp: Any = w.call(1, 12, body=body)
    return resp.responses[0].partitions[0]


def list_offsets(w: Wire, topic: str, current_leader_epoch: int) -> Any:
    cls = request_class(2, 7)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    body = make(cls, replica_id=-1, isolation_level=0, topics=(make(
        tcls, name=topic, partitions=(make(pcls, partition_index=0, timestamp=-1,
                                           current_leader_epoch=current_leader_epoch),)),))
    resp: Any = w.call(2, 7, body=body)
    return resp.topics[0].partitions[0]


def epoch_end(w: Wire, topic: str, current: int) -> Any:
    cls = request_class(23, 4)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    resp: Any = w.call(23, 4, body=make(cls, replica_id=-1, topics=(make(
        tcls, topic=topic, partitions=(make(pcls, partition=0, current_leader_epoch=current,
                                            leader_epoch=2),)),)))
    return resp.topics[0].partitions[0]


def test_requests_naming_another_leader_epoch_are_fenced(broker: EmbeddedBroker,
                                                         w: Wire) -> None:
    node = broker.broker.node_id
    metadata(w, ["fenced"])
    state = LeaderAndIsrPartitionState("fenced", 0, 1, node, 2, (node,), 2, (node,))

    async def bump() -> Any:
        return broker.broker.replica_manager.become_leader_or_follower(node, 1, [state], {})

    broker.run(bump())
    assert list_offsets(w, "fenced", 2).error_code == 0
    assert list_offsets(w, "fenced", 2).leader_epoch == 2
    assert list_offsets(w, "fenced", 1).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert list_offsets(w, "fenced", 3).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert epoch_end(w, "fenced", 1).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert epoch_end(w, "fenced", 2).error_code == 0
    assert fetch(w, "fenced", 1).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert fetch(w, "fenced", 3).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch(w, "fenced", -1).error_code == 0


def test_handlers_report_the_cluster_the_image_registers(broker: EmbeddedBroker,
                                                         w: Wire) -> None:
    node = broker.broker.node_id
    assert find_coordinator(w).node_id == node  # creates __consumer_offsets, led here
    metadata(w, ["shared"])
    cache = broker.broker.metadata_cache
    image = cache.image
    group_tp = TopicPartition(OFFSETS_TOPIC, partition_for(GROUP, 4))
    here = image.broker(node)
    assert here is not None and here.rack == "rack-a"
    delta = UpdateMetadataDelta(
        controller_id=2, controller_epoch=3,
        brokers=[here, BrokerInfo(2, MappingProxyType({"PLAINTEXT": ("h2", 9093)}), "rack-b", 7),
                 BrokerInfo(3, MappingProxyType({"INTERNAL": ("h3", 9094)}), None, 8)],
        partitions={
            TopicPartition("shared", 0): PartitionRegistration((2, node, 3), (2, node), 2, 7, 9,
                                                               offline_replicas=(3,)),
            group_tp: PartitionRegistration((2, node), (2, node), 2, 1, 1),
        },
        topic_ids={"shared": image.topics["shared"].topic_id})

    async def apply() -> None:
        cache.update_metadata(delta)

    broker.run(apply())
    md: Any = metadata(w, ["shared"])
    # broker 3 has no endpoint on the client's listener: left out, as Kafka does
    assert sorted((b.node_id, b.host, b.port, b.rack) for b in md.brokers) == sorted(
        [(node, "127.0.0.1", broker.port, "rack-a"), (2, "h2", 9093, "rack-b")])
    assert md.controller_id == 2
    p = md.topics[0].partitions[0]
    assert (p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas) == \
        (2, 7, (2, node, 3), (2, node), (3,))
    dc: Any = w.call(60, 1, include_cluster_authorized_operations=False, endpoint_type=1)
    assert dc.controller_id == 2
    assert sorted(b.broker_id for b in dc.brokers) == sorted([node, 2])
    coord = find_coordinator(w)
    assert (coord.error_code, coord.node_id, coord.host, coord.port) == (0, 2, "h2", 9093)
    # the coordinator's partition loses its leader: no coordinator to name
    offline = UpdateMetadataDelta(2, 3, [here], {group_tp: PartitionRegistration(
        (2,), (), -1, 2, 2)})

    async def lose_leader() -> None:
        cache.update_metadata(offline)

    broker.run(lose_leader())
    assert find_coordinator(w).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
