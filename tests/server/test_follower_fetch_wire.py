"""A follower as the leader sees it, over real sockets: a LeaderAndIsr puts broker 99 in the
partition's ISR, so the high watermark waits for it. A consumer reads to the high
watermark; Fetch with replica_id 99 reads to the log end and moves the leader's high
watermark; an acks=-1 Produce is answered once the follower has the batch (DelayedProduce),
or REQUEST_TIMED_OUT after its timeout."""

from __future__ import annotations

import dataclasses
import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import Wire, produce_body

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import build_batch
from tidelog.server.cluster.partition_state import LeaderAndIsrPartitionState
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

FOLLOWER = 99
TP = TopicPartition("replicated", 0)


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(log_dir=tmp_path) as b:
        with Wire(b) as w:  # auto-creates the topic, led here with ISR [self]
            cls = request_class(3, 12)
            w.call(3, 12, body=make(cls, topics=(make(nested(cls, "topics"), name=TP.topic),),
                                    allow_auto_topic_creation=True))
        node = b.broker.node_id
        state = LeaderAndIsrPartitionState(TP.topic, 0, 1, node, 1, (node, FOLLOWER), 1,
                                           (node, FOLLOWER))

        async def with_follower() -> Any:
            return b.broker.replica_manager.become_leader_or_follower(node, 1, [state], {})

        assert b.run(with_follower()).errors[TP] == ErrorCode.NONE
        yield b


def fetch(w: Wire, offset: int, replica_id: int = -1, version: int = 12,
          topic_id: uuid.UUID | None = None) -> Any:
    """Fetch v12 names the follower in replica_id; v15 in replica_state (and the topic by
    id)."""
    cls = request_class(1, version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    part = make(pcls, partition=0, current_leader_epoch=1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=0, partition_max_bytes=1 << 20)
    topic = make(tcls, topic=TP.topic, topic_id=topic_id, partitions=(part,))
    who: dict[str, Any] = {"replica_id": replica_id}
    if version >= 15:
        who = {"replica_state": make(nested(cls, "replica_state"), replica_id=replica_id,
                                     replica_epoch=5)}
    body = make(cls, max_wait=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=(topic,), forgotten_topics_data=(),
                rack_id="", **who)
    resp: Any = w.call(1, version, body=body)
    return resp.responses[0].partitions[0]


def produce(w: Wire, n: int, acks: int, timeout_ms: int = 30_000) -> Any:
    body = produce_body(9, TP.topic, {0: build_batch([(i, None, b"v") for i in range(n)])},
                        acks=acks)
    body = dataclasses.replace(body, timeout=datetime.timedelta(milliseconds=timeout_ms))
    w.send(0, 9, body=body)
    return w


def produce_result(w: Wire) -> Any:
    resp: Any = w.recv(0, 9)
    return resp.responses[0].partition_responses[0]


@pytest.mark.parametrize("version", [12, 15])
def test_follower_reads_past_the_high_watermark_and_moves_it(broker: EmbeddedBroker,
                                                            version: int) -> None:
    topic_id = broker.broker.metadata_cache.image.topics[TP.topic].topic_id
    with Wire(broker) as w:
        assert produce_result(produce(w, 3, acks=1)).error_code == 0
        consumer = fetch(w, 0, version=version, topic_id=topic_id)
        assert (consumer.high_watermark, len(consumer.records or b"")) == (0, 0)
        follower = fetch(w, 0, FOLLOWER, version, topic_id)
        assert follower.error_code == 0 and len(follower.records) > 0
        assert follower.high_watermark == 0  # it has not told the leader it has them
        caught_up = fetch(w, 3, FOLLOWER, version, topic_id)
        assert caught_up.high_watermark == 3
        assert len(fetch(w, 0, version=version, topic_id=topic_id).records) > 0
    replica = broker.broker.replica_manager.partitions[TP].remote_replicas[FOLLOWER]
    assert replica.log_end_offset == 3
    assert replica.broker_epoch == (5 if version >= 15 else -1)


def test_acks_all_answers_once_the_follower_has_the_batch(broker: EmbeddedBroker) -> None:
    with Wire(broker) as producer, Wire(broker) as replica:
        produce(producer, 2, acks=-1)
        parked = broker.broker.replica_manager.delayed_produce
        deadline = time.monotonic() + 10
        while len(parked) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(parked) == 1  # appended, waiting for the follower
        fetch(replica, 0, replica_id=FOLLOWER)
        fetch(replica, 2, replica_id=FOLLOWER)
        result = produce_result(producer)
        assert (result.error_code, result.base_offset) == (0, 0)


def test_acks_all_times_out_without_the_follower(broker: EmbeddedBroker) -> None:
    with Wire(broker) as w:
        result = produce_result(produce(w, 1, acks=-1, timeout_ms=200))
        assert result.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert broker.broker.replica_manager.partitions[TP].log_end_offset == 1
