"""A follower serving consumers (KIP-392), over real sockets: the broker writes ten records as
leader, then a LeaderAndIsr makes it a follower of broker 98 whose high watermark stands at 7.
A consumer's Fetch v11+ reads there up to that high watermark, an offset between it and the
log end waits (an empty answer), one past the log end is OFFSET_OUT_OF_RANGE (the consumer
goes back to the leader), a newer leader epoch is UNKNOWN_LEADER_EPOCH; before v11 (no client
metadata) and for ListOffsets only the leader answers (NOT_LEADER_OR_FOLLOWER)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest
from broker_wire import Wire, produce_body

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records import build_batch, iter_batches
from tidelog.server.cluster.partition_state import LeaderAndIsrPartitionState
from tidelog.server.replication.fetcher_manager import InitialFetchState
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

LEADER = 98
TP = TopicPartition("followed", 0)
EPOCH = 2


class FetchesNothing:
    """Where the follower's fetcher would start: nowhere (its leader does not exist)."""

    def __init__(self) -> None:
        self.added: dict[TopicPartition, InitialFetchState] = {}

    def add_fetcher_for_partitions(self, states: Mapping[TopicPartition, InitialFetchState]) -> None:
        self.added.update(states)

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.added.pop(tp, None)


@pytest.fixture
def broker(tmp_path: Any) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(log_dir=tmp_path) as b:
        with Wire(b) as w:  # auto-created, led here: ten records
            cls = request_class(3, 12)
            w.call(3, 12, body=make(cls, topics=(make(nested(cls, "topics"), name=TP.topic),),
                                    allow_auto_topic_creation=True))
            for i in range(10):  # a batch each: the high watermark falls between two
                body = produce_body(9, TP.topic, {0: build_batch([(i, None, b"v")])}, acks=1)
                resp: Any = w.call(0, 9, body=body)
                assert resp.responses[0].partition_responses[0].error_code == 0
        node = b.broker.node_id
        state = LeaderAndIsrPartitionState(TP.topic, 0, 1, LEADER, EPOCH, (LEADER, node), 1,
                                           (LEADER, node))

        async def follow() -> Any:
            rm = b.broker.replica_manager
            rm.fetcher_manager = FetchesNothing()  # broker 98 is not there: no fetching
            out = rm.become_leader_or_follower(LEADER, 1, [state], {})
            rm.partitions[TP].update_follower_high_watermark(7, 0)  # the leader's, as fetched
            return out

        assert b.run(follow()).errors[TP] == ErrorCode.NONE
        p = b.broker.replica_manager.partitions[TP]
        assert (p.is_leader, p.high_watermark, p.log_end_offset) == (False, 7, 10)
        yield b


def fetch(w: Wire, offset: int, version: int = 12, epoch: int = EPOCH) -> Any:
    cls = request_class(1, version)
    tcls = nested(cls, "topics")
    part = make(nested(tcls, "partitions"), partition=0, current_leader_epoch=epoch,
                fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=1 << 20)  # fmt: skip
    body = make(cls, replica_id=-1, max_wait=0, min_bytes=1, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1,
                topics=(make(tcls, topic=TP.topic, partitions=(part,)),),
                forgotten_topics_data=(), rack_id="b")  # fmt: skip
    resp: Any = w.call(1, version, body=body)
    return resp.responses[0].partitions[0]


def offsets(records: bytes) -> list[int]:
    return [r.offset for b in iter_batches(bytes(records)) for r in b.iter_records()]


def test_a_follower_serves_consumers_up_to_its_high_watermark(broker: EmbeddedBroker) -> None:
    with Wire(broker) as w:
        got = fetch(w, 0)
        assert (got.error_code, got.high_watermark, got.preferred_read_replica) == (0, 7, -1)
        assert offsets(got.records) == list(range(7))
        waits = fetch(w, 8)  # past the high watermark, within the log: nothing yet
        assert (waits.error_code, len(waits.records or b"")) == (0, 0)
        assert fetch(w, 11).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert fetch(w, 0, epoch=EPOCH + 1).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert fetch(w, 0, version=10).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_list_offsets_is_answered_by_the_leader_only(broker: EmbeddedBroker) -> None:
    with Wire(broker) as w:
        cls = request_class(2, 5)
        tcls = nested(cls, "topics")
        part = make(nested(tcls, "partitions"), partition_index=0, current_leader_epoch=EPOCH,
                    timestamp=-1)  # fmt: skip
        body = make(cls, replica_id=-1, isolation_level=0,
                    topics=(make(tcls, name=TP.topic, partitions=(part,)),))  # fmt: skip
        resp: Any = w.call(2, 5, body=body)
        assert resp.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
