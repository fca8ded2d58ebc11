"""A ShareFetch answers by its max wait when the share-partition's state cannot be read.

One broker in ZooKeeper mode with ``share.coordinator.state.topic.replication.factor`` at
Kafka's default 3: ``__share_group_state`` cannot be created (fewer live brokers than its
replication factor: Kafka's internal topic creation refuses it, and FindCoordinator for a
share key answers COORDINATOR_NOT_AVAILABLE), so the share-partition leader's first read of
the state never finds a share coordinator. Kafka's SharePartition initialises on its own
while DelayedShareFetch answers at its max wait; when the persister gives up, the partition
answers COORDINATOR_NOT_AVAILABLE (SharePartition.fetchPersisterError) and the next fetch
reads again."""

from __future__ import annotations

import base64
import datetime
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.coordinator.share.records import SHARE_STATE_TOPIC
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from broker_wire import Wire

GROUP, MEMBER, TOPIC = "sg-unavailable", "m-unavailable", "unshared"
MAX_WAIT_MS = 500
RETRY_WINDOW_S = 30  # the persister's retries of an unavailable share coordinator


@pytest.fixture
def cluster(zookeeper_server: ZooKeeperServer) -> Iterator[EmbeddedCluster]:
    config = {"offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
              "share.coordinator.state.topic.num.partitions": 1}
    with EmbeddedCluster(brokers=1, config=config, zookeeper=zookeeper_server) as c:
        yield c


def share_fetch(w: Wire, epoch: int, topic_id: uuid.UUID) -> Any:
    cls = request_class(78, 1)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    body = make(cls, group_id=GROUP, member_id=MEMBER, share_session_epoch=epoch,
                max_wait=datetime.timedelta(milliseconds=MAX_WAIT_MS), min_bytes=1,
                max_bytes=1 << 20, max_records=500, batch_size=500,
                topics=(make(tcls, topic_id=topic_id, partitions=(
                    make(pcls, partition_index=0, acknowledgement_batches=()),)),),
                forgotten_topics_data=())
    return w.call(78, 1, body=body)


def join(w: Wire) -> int:
    deadline = time.monotonic() + 60
    while True:  # the group coordinator answers once __consumer_offsets is there
        w.call(10, 6, key_type=0, coordinator_keys=(GROUP,))  # creates it
        hb: Any = w.call(76, 1, group_id=GROUP, member_id=MEMBER, member_epoch=0,
                         rack_id=None, subscribed_topic_names=(TOPIC,))
        if hb.error_code == ErrorCode.NONE or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert hb.error_code == ErrorCode.NONE
    return int(hb.member_epoch)


def partition_errors(resp: Any) -> list[tuple[int, int]]:
    return [(int(p.error_code), len(p.acquired_records))
            for t in resp.responses for p in t.partitions]


def test_share_fetch_answers_by_max_wait_while_the_share_state_is_unavailable(
        cluster: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(3):
        p.produce(TOPIC, str(i).encode(), partition=0)
    assert p.flush(30) == 0
    found = cluster.zk.get_topic_assignment(TOPIC)
    assert found is not None and found[0].topic_id is not None
    topic_id = found[0].topic_id
    with Wire(cluster.brokers[1]) as w:  # its socket times out after 10 s
        member_epoch = join(w)
        first: Any = share_fetch(w, 0, topic_id)
        # answered by the max wait (the state read goes on), with no records and no error
        assert first.error_code == ErrorCode.NONE
        assert partition_errors(first) == []
        key = f"{GROUP}:{base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip('=')}:0"
        coord: Any = w.call(10, 6, key_type=2, coordinator_keys=(key,))
        assert coord.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert cluster.zk.get_topic_assignment(SHARE_STATE_TOPIC) is None
        # fetch on: once the persister gives up, the partition answers its mapped error
        epoch, seen = 1, []
        deadline = time.monotonic() + RETRY_WINDOW_S * 3
        while time.monotonic() < deadline and not seen:
            resp: Any = share_fetch(w, epoch, topic_id)
            assert resp.error_code == ErrorCode.NONE
            hb: Any = w.call(76, 1, group_id=GROUP, member_id=MEMBER,
                             member_epoch=member_epoch, rack_id=None,
                             subscribed_topic_names=None)  # the member stays
            assert hb.error_code == ErrorCode.NONE
            seen = partition_errors(resp)
            epoch += 1
        assert seen == [(ErrorCode.COORDINATOR_NOT_AVAILABLE, 0)]
        again: Any = share_fetch(w, epoch, topic_id)  # a new read: loading again
        assert partition_errors(again) == []
