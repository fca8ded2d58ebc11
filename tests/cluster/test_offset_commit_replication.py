"""An offset commit reaches the group coordinator's cache only once replicated (Kafka's
GroupMetadataManager: pendingOffsetCommits, applied in the acks=all append's callback, dropped
when it fails). Three broker processes; ``__consumer_offsets`` has one partition, replicated
three times. A follower of it is paused (SIGSTOP, inside its ZooKeeper session and
``replica.lag.time.max.ms``, so it stays in the ISR): a commit is appended by the leader but
cannot be replicated, and times out (COORDINATOR_NOT_AVAILABLE, Kafka's mapping of
REQUEST_TIMED_OUT). OffsetFetch must not return it, during the wait or after; a commit made once
the follower is back is answered and fetched."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

from replication_support import all_have_full_isr, create_topic, states, wait_for

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

GROUP = "replicated-commits"
TOPIC = "t"
SESSION_TIMEOUT_MS = 30_000
CONFIG = {
    "offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3",
    "replica.lag.time.max.ms": "60000",  # the paused follower stays in the ISR
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "auto.leader.rebalance.enable": "false",
}  # fmt: skip
OFFSETS = TopicPartition("__consumer_offsets", 0)
RETRIABLE = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE)
VERSIONS = {18: (0, 3), 8: (7, 7), 9: (7, 7), 10: (3, 3)}


class Client:
    """One connection to a broker, used from the test's thread."""

    def __init__(self, port: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.conn = self.loop.run_until_complete(
            AsyncBrokerConnection.connect("127.0.0.1", port, client_id="t", api_ranges=VERSIONS)
        )

    def call(self, key: int, body: dict[str, Any], timeout_s: float = 30) -> Any:
        return self.loop.run_until_complete(
            self.conn.call(key, VERSIONS[key][1], body, timeout_s=timeout_s)
        )

    def commit(self, offset: int) -> int:
        r = self.call(8, {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
                          "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
                              {"partition_index": 0, "committed_offset": offset,
                               "committed_leader_epoch": -1, "committed_metadata": ""}]}]})  # fmt: skip
        return int(r.topics[0].partitions[0].error_code)

    def fetch(self) -> int:
        r = self.call(9, {"group_id": GROUP, "topics": [{"name": TOPIC, "partition_indexes": [0]}],
                          "require_stable": False})  # fmt: skip
        assert int(r.error_code) == 0
        return int(r.topics[0].partitions[0].committed_offset)

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


def _coordinator(cluster: EmbeddedCluster) -> int:
    """FindCoordinator until the group's coordinator is known (it creates the topic)."""
    c = Client(cluster.brokers[min(cluster.brokers)].port)
    try:
        deadline = time.monotonic() + 60
        while True:
            r = c.call(10, {"key": GROUP, "key_type": 0})
            if int(r.error_code) == 0:
                return int(r.node_id)
            assert time.monotonic() < deadline, f"no coordinator: {r.error_code}"
            time.sleep(0.1)
    finally:
        c.close()


def test_a_commit_not_replicated_is_never_fetched(zookeeper_server: ZooKeeperServer) -> None:
    with EmbeddedCluster(brokers=3, config=CONFIG, zookeeper=zookeeper_server) as cluster:
        create_topic(cluster, TOPIC, 1)
        coordinator = _coordinator(cluster)
        wait_for(lambda: all_have_full_isr(cluster, [OFFSETS], 3), 60, "__consumer_offsets' full ISR")
        assert states(cluster, [OFFSETS])[OFFSETS].leader == coordinator
        client = Client(cluster.brokers[coordinator].port)
        try:
            deadline = time.monotonic() + 60
            while (error := client.commit(1)) != ErrorCode.NONE:  # retriable while it loads
                assert error in RETRIABLE and time.monotonic() < deadline, error
                time.sleep(0.1)
            assert client.fetch() == 1

            controller = cluster.controller_id()
            follower = next(b for b in sorted(cluster.brokers) if b not in (coordinator, controller))
            paused = time.monotonic()
            cluster.brokers[follower].signal(signal.SIGSTOP)
            try:
                # appended by the leader, never replicated: offsets.commit.timeout.ms (5 s)
                assert client.commit(2) == ErrorCode.COORDINATOR_NOT_AVAILABLE
                assert client.fetch() == 1
                assert follower in states(cluster, [OFFSETS])[OFFSETS].isr  # not a shrink
            finally:
                cluster.brokers[follower].signal(signal.SIGCONT)
            assert time.monotonic() - paused < SESSION_TIMEOUT_MS / 1000  # it stayed registered
            # the follower catches up (the record it lacked is in the log now), and the cache
            # still holds what was acknowledged
            assert client.commit(3) == ErrorCode.NONE
            assert client.fetch() == 3
        finally:
            client.close()
