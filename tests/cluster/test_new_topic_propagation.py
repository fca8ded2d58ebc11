"""A new topic on three brokers: what the first clients of it see.

* CreateTopics answers once every live broker's metadata has the new leaders, also when one
  broker applies the controller's UpdateMetadata late (its LeaderAndIsr answer held back by
  the fault plan, as slow log creation does): a describe through any broker finds the topic.
* The first acks=all produce to a new topic whose followers are parked in a Fetch for
  another partition of the same leader is acknowledged without waiting out that Fetch
  (``replica.fetch.wait.max.ms`` set far above the produce's timeout here).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from tidelog.client.conn import BrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.records.builder import build_batch
from tidelog.server.fault_file import FAULT_PLAN_FILE, FaultPlanFile
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer

LEADER_AND_ISR = 4


def _conn(cluster: EmbeddedCluster, broker_id: int) -> BrokerConnection:
    return BrokerConnection("127.0.0.1", cluster.brokers[broker_id].port, client_id="t", timeout_s=60)


def _create(conn: BrokerConnection, topic: str, replicas: list[int]) -> None:
    resp = conn.request(19, {"topics": [{
        "name": topic, "num_partitions": -1, "replication_factor": -1,
        "assignments": [{"partition_index": 0, "broker_ids": replicas}], "configs": []}],
        "timeout": 30000, "validate_only": False})  # fmt: skip
    assert int(resp.topics[0].error_code) == 0, resp


def _leaders(conn: BrokerConnection, topic: str) -> tuple[int, dict[int, int]]:
    """(topic error code, partition -> leader) in the broker's Metadata, not creating it."""
    resp = conn.request(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    t = resp.topics[0]
    return int(t.error_code), {int(p.partition_index): int(p.leader_id) for p in t.partitions}


def _produce(conn: BrokerConnection, topic: str, timeout_ms: int) -> Any:
    batch = build_batch([(int(time.time() * 1000), None, b"v")])
    resp = conn.request(0, {"transactional_id": None, "acks": -1, "timeout": timeout_ms,
                            "topic_data": [{"name": topic, "partition_data": [
                                {"index": 0, "records": batch}]}]})  # fmt: skip
    return resp.responses[0].partition_responses[0]


def test_create_topics_answers_once_every_broker_shows_the_leaders(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    config = {FAULT_PLAN_FILE: str(tmp_path / "faults-{broker.id}.jsonl")}
    with EmbeddedCluster(brokers=3, config=config, zookeeper=zookeeper_server) as cluster:
        late = FaultPlanFile(tmp_path / "faults-3.jsonl")
        # broker 3 answers the LeaderAndIsr 1 s late: the controller's UpdateMetadata, queued
        # behind it, reaches broker 3 that much after brokers 1 and 2
        late.delay_responses(LEADER_AND_ISR, 1000, times=1)
        _create(_conn(cluster, 1), "fresh", [1, 2, 3])
        for b in (1, 2, 3):
            assert _leaders(_conn(cluster, b), "fresh") == (0, {0: 1}), f"broker {b}"
        assert [f.kind for f in late.injected] == ["delay"]


def test_first_acks_all_produce_to_a_new_topic_does_not_wait_for_the_followers_fetch(
    zookeeper_server: ZooKeeperServer,
) -> None:
    config = {"replica.fetch.wait.max.ms": "25000", "replica.lag.time.max.ms": "30000"}
    with EmbeddedCluster(brokers=3, config=config, zookeeper=zookeeper_server) as cluster:
        leader = _conn(cluster, 1)
        _create(leader, "warm", [1, 2, 3])
        first = _produce(leader, "warm", 20000)
        assert int(first.error_code) == 0, first
        # brokers 2 and 3 now fetch "warm" from broker 1, parked there for up to 25 s
        _create(leader, "fresh", [1, 2, 3])
        got = _produce(leader, "fresh", 8000)
        assert int(got.error_code) == ErrorCode.NONE, got  # not REQUEST_TIMED_OUT
        assert int(got.base_offset) == 0


def test_a_follower_fetches_a_new_topic_before_its_leader_metadata_has_it(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    """The leader applies its LeaderAndIsr at once but answers it 3 s late, so its
    UpdateMetadata comes 3 s after the followers start fetching by the new topic's id: their
    fetches are served (not UNKNOWN_TOPIC_ID, which would hold them back the 20 s of
    ``replica.fetch.backoff.ms`` here) and an acks=all produce is acknowledged."""
    config = {FAULT_PLAN_FILE: str(tmp_path / "faults-{broker.id}.jsonl"),
              "replica.fetch.backoff.ms": "20000"}  # fmt: skip
    with EmbeddedCluster(brokers=3, config=config, zookeeper=zookeeper_server) as cluster:
        FaultPlanFile(tmp_path / "faults-1.jsonl").delay_responses(LEADER_AND_ISR, 3000, times=1)
        _create(_conn(cluster, 2), "fresh", [1, 2, 3])
        leader = _conn(cluster, 1)
        deadline = time.monotonic() + 30
        while int((got := _produce(leader, "fresh", 8000)).error_code) in (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER):  # fmt: skip
            assert time.monotonic() < deadline, got
            time.sleep(0.05)
        assert int(got.error_code) == ErrorCode.NONE, got  # not REQUEST_TIMED_OUT
        assert int(got.base_offset) == 0


def test_create_topics_does_not_wait_for_a_broker_that_does_not_answer(
    zookeeper_server: ZooKeeperServer,
) -> None:
    """A stopped broker (SIGSTOP: still registered, no answer) holds CreateTopics back at
    most the peer wait (2 s), well inside the request's 30 s timeout."""
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server) as cluster:
        stopped = next(b for b in (3, 2) if b != cluster.wait_for_controller())
        live = [b for b in (1, 2, 3) if b != stopped]
        creator = _conn(cluster, live[0])
        cluster.brokers[stopped].signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            _create(creator, "fresh", live)
            assert time.monotonic() - started < 15  # not the request's 30 s
            assert _leaders(_conn(cluster, live[1]), "fresh") == (0, {0: live[0]})
        finally:
            cluster.brokers[stopped].signal(signal.SIGCONT)
