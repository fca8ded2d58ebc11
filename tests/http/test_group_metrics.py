"""/metrics for the three kinds of group, with real clients: a classic group and a KIP-848
consumer group (confluent-kafka consumers) and a KIP-932 share group (a confluent-kafka
ShareConsumer holding records it has not acknowledged): type, state, members, assignment
sizes, Kafka's group counts, and the share-partition's in-flight records and lock age."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from http_support import HTTP, sample, scrape, wait_for

from tidelog.testing import EmbeddedBroker

TOPIC = "observed"


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({**HTTP, "offsets.topic.num.partitions": "3",
                         "group.share.heartbeat.interval.ms": "250",
                         "group.consumer.heartbeat.interval.ms": "250"}) as eb:
        admin = AdminClient({"bootstrap.servers": eb.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(10)
        yield eb


def _consumer(eb: EmbeddedBroker, group: str, **extra: str) -> confluent_kafka.Consumer:
    c = confluent_kafka.Consumer({"bootstrap.servers": eb.bootstrap_servers, "group.id": group,
                                  "client.id": f"{group}-client", **extra})
    c.subscribe([TOPIC])
    return c


def _poll_until(consumers: list[Any], done: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        for c in consumers:
            c.poll(0.05)


def test_classic_consumer_and_share_groups_on_metrics(broker: EmbeddedBroker) -> None:
    base = broker.http.urls[0]
    classic = [_consumer(broker, "classic-g") for _ in range(2)]
    kip848 = [_consumer(broker, "kip848-g", **{"group.protocol": "consumer"})]
    share = ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "share-g",
                           "client.id": "share-g-client",
                           "share.acknowledgement.mode": "explicit"})
    share.subscribe([TOPIC])
    try:
        def settled() -> bool:
            s = scrape(base)
            return (sample(s, "tidelog_group_state", group="classic-g", type="classic",
                           state="Stable") == 1
                    and sample(s, "tidelog_group_state", group="kip848-g", type="consumer",
                               state="Stable") == 1
                    and sample(s, "tidelog_group_members", group="share-g", type="share") == 1
                    and sample(s, "tidelog_group_members", group="classic-g",
                               type="classic") == 2)

        _poll_until([*classic, *kip848, share], settled, "three settled groups")
        p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(5):
            p.produce(TOPIC, b"r%d" % i, partition=0)
        assert p.flush(10) == 0
        held: list[Any] = []
        read = 0
        deadline = time.monotonic() + 30
        while (len(held) < 5 or read < 5) and time.monotonic() < deadline:
            if len(held) < 5:  # explicit mode: no poll before what it gave is acknowledged
                held += [m for m in share.poll(0.1) if m.partition() == 0]
            m = kip848[0].poll(0.05)
            read += m is not None and m.error() is None
            for c in classic:
                c.poll(0)
        assert len(held) == 5 and read == 5
        kip848[0].commit(asynchronous=False)  # a KIP-848 group's offsets, for its lag
        for m in held[:2]:
            share.acknowledge(m, AcknowledgeType.ACCEPT)
        share.commit_sync(10)
        acquired_at = time.monotonic()
        sp = {"group": "share-g", "topic": TOPIC, "partition": "0"}

        def acknowledged() -> dict[Any, float] | None:
            s = scrape(base)
            return s if sample(s, "tidelog_share_partition_start_offset", **sp) == 2 else None

        s = wait_for(acknowledged, "the two acknowledgements to move the start offset")
        assert sample(s, "tidelog_share_partition_acquired_records", **sp) == 3
        assert sample(s, "tidelog_share_partition_in_flight_records", **sp) == 3
        assert sample(s, "tidelog_share_partition_end_offset", **sp) == 5
        assert sample(s, "tidelog_share_partition_start_offset", **sp) == 2
        age = sample(s, "tidelog_share_partition_oldest_lock_age_seconds", **sp)
        assert 0 < age <= time.monotonic() - acquired_at + 30  # under the 30 s lock duration
        later = scrape(base)
        assert sample(later, "tidelog_share_partition_oldest_lock_age_seconds", **sp) >= age
        lag = {"consumergroup": "kip848-g", "topic": TOPIC, "partition": "0"}
        assert sample(s, "kafka_consumergroup_current_offset", **lag) == 5
        assert ("kafka_consumergroup_lag", tuple(sorted(lag.items()))) in s
        assert sample(s, "kafka_consumergroup_lag", **lag) == 0
        counts = {pr: sample(s, "kafka_server_group_coordinator_metrics_group_count",
                             protocol=pr) for pr in ("classic", "consumer", "share")}
        assert counts == {"classic": 1, "consumer": 1, "share": 1}
        assert sample(s, "kafka_server_group_coordinator_metrics_consumer_group_count",
                      state="stable") == 1
        assigned = {k[1]: v for k, v in s.items()
                    if k[0] == "tidelog_group_member_assigned_partitions"}
        sizes = sorted(v for labels, v in assigned.items()
                       if ("group", "classic-g") in labels)
        assert sizes == [1, 1]  # two classic members split two partitions
        kip = [v for labels, v in assigned.items() if ("group", "kip848-g") in labels]
        assert kip == [2]
        shared = [(dict(labels)["client_id"], v) for labels, v in assigned.items()
                  if ("group", "share-g") in labels]
        assert shared == [("share-g-client", 2)]  # a share member is assigned both
    finally:
        share.close()
        for c in [*classic, *kip848]:
            c.close()
