"""confluent-kafka ``ShareConsumer``s (KIP-932, librdkafka's share consumer) against the
broker: records of one partition shared among consumers, acknowledged exactly once, locks
that run out, REJECT and the delivery count limit, a consumer killed while holding records.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import (
    AcknowledgeType,
    KafkaError,
    KafkaException,
    Producer,
    ShareConsumer,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from tidelog.server.coordinator.group.share.partition import SharePartition
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

LOCK_MS = 2000
CONFIG = {
    "group.share.heartbeat.interval.ms": 250,
    "group.share.record.lock.duration.ms": LOCK_MS,
    "offsets.topic.num.partitions": 3,
}
WORKER = Path(__file__).with_name("share_group_worker.py")


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(CONFIG) as b:
        yield b


def wait_for(cond: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def share_partition(broker: EmbeddedBroker, group: str, topic: str) -> SharePartition | None:
    return broker.broker.group_coordinator.share.partitions.get((group, TopicPartition(topic, 0)))


def setup(broker: EmbeddedBroker, topic: str, group: str, consumers: list[ShareConsumer],
          count: int) -> None:
    """Create the topic, let the consumers open the share-partition (it starts at the high
    watermark: share.auto.offset.reset latest), then produce ``count`` records in batches of
    at most five (a share fetch acquires whole batches)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    for c in consumers:
        c.subscribe([topic])

    def opened() -> bool:
        for c in consumers:
            c.poll(0.05)
        return share_partition(broker, group, topic) is not None

    wait_for(opened, what="the share-partition")
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(count):
        p.produce(topic, str(i).encode(), partition=0)
        if i % 5 == 4:
            p.flush(10)
    p.flush(10)


def consumer(broker: EmbeddedBroker, group: str, **conf: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                          **conf})


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_four_consumers_on_one_partition_accept_every_record_once(
        broker: EmbeddedBroker, mode: str) -> None:
    group, topic, count = f"sg-{mode}", f"queue-{mode}", 200
    consumers = [consumer(broker, group, **{"share.acknowledgement.mode": mode,
                                            "max.poll.records": "5"}) for _ in range(4)]
    try:
        setup(broker, topic, group, consumers, count)
        got: list[list[int]] = [[] for _ in consumers]
        deadline = time.monotonic() + 60
        while sum(map(len, got)) < count and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for m in c.poll(0.05):
                    assert m.error() is None, m.error()
                    got[i].append(m.offset())
                    if mode == "explicit":
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                if mode == "explicit":
                    c.commit_sync(10)
        for c in consumers:  # implicit mode accepts on the next poll or commit
            c.commit_sync(10)
        every = [o for g in got for o in g]
        assert sorted(every) == list(range(count))  # disjoint, nothing twice, nothing lost
        print(f"{mode}: records per consumer {[len(g) for g in got]}")
        assert sum(1 for g in got if g) >= 2  # the partition was shared
        sp = share_partition(broker, group, topic)
        assert sp is not None
        wait_for(lambda: sp.start_offset == count and not sp.records, what="all accepted")
    finally:
        for c in consumers:
            c.close()


def test_reject_archives_and_a_fifth_release_archives(broker: EmbeddedBroker) -> None:
    c = consumer(broker, "sg-acks", **{"share.acknowledgement.mode": "explicit",
                                       "max.poll.records": "1"})
    try:
        setup(broker, "acks", "sg-acks", [c], 3)
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while len(seen) < 7 and time.monotonic() < deadline:
            for m in c.poll(0.1):
                seen.append((m.offset(), m.delivery_count()))
                c.acknowledge(m, AcknowledgeType.REJECT if m.offset() == 0
                              else AcknowledgeType.RELEASE if m.offset() == 1
                              else AcknowledgeType.ACCEPT)
            c.commit_sync(10)
        assert [d for o, d in seen if o == 0] == [1]  # rejected: never again
        assert [d for o, d in seen if o == 1] == [1, 2, 3, 4, 5]  # then archived
        assert [d for o, d in seen if o == 2] == [1]
        sp = share_partition(broker, "sg-acks", "acks")
        assert sp is not None
        wait_for(lambda: sp.start_offset == 3, what="the start offset past all three")
    finally:
        c.close()


def test_records_of_a_killed_consumer_are_redelivered_after_the_lock(
        broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("killed", 1, 1)])["killed"].result(10)
    proc = subprocess.Popen([sys.executable, str(WORKER), broker.bootstrap_servers,
                             "sg-kill", "killed"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    other = consumer(broker, "sg-kill", **{"share.acknowledgement.mode": "explicit"})
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"subscribed": True}
        wait_for(lambda: share_partition(broker, "sg-kill", "killed") is not None,
                 what="the worker's share-partition")
        p = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(5):
            p.produce("killed", str(i).encode(), partition=0)
        p.flush(10)
        held = json.loads(proc.stdout.readline())
        assert held["delivery_count"] == 1
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        killed = time.monotonic()
        other.subscribe(["killed"])
        again: dict[int, int] = {}
        deadline = time.monotonic() + 30
        while len(again) < 5 and time.monotonic() < deadline:
            for m in other.poll(0.1):
                again[m.offset()] = m.delivery_count()
                other.acknowledge(m, AcknowledgeType.ACCEPT)
            other.commit_sync(10)
        assert sorted(again) == list(range(5))
        assert again[held["offset"]] == 2  # redelivered: its second delivery
        waited = time.monotonic() - killed
        print(f"record {held['offset']} redelivered {waited * 1000:.0f} ms after the kill")
        # the lock, not the member's session (45 s), gave them back
        assert waited < broker.broker.group_coordinator.config.group_share_session_timeout_ms / 1000
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        other.close()


def test_a_restart_keeps_accepted_records_and_redelivers_the_rest(tmp_path: Path) -> None:
    with EmbeddedBroker(CONFIG, log_dir=tmp_path) as broker:
        c = consumer(broker, "sg-restart", **{"share.acknowledgement.mode": "explicit"})
        setup(broker, "durable-queue", "sg-restart", [c], 10)
        held: list[int] = []
        deadline = time.monotonic() + 30
        while len(held) < 10 and time.monotonic() < deadline:
            for m in c.poll(0.1):
                held.append(m.offset())
                if m.offset() < 5:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
        assert sorted(held) == list(range(10))
        c.commit_sync(10)  # 0..4 accepted, 5..9 still held when the consumer goes
        sp = share_partition(broker, "sg-restart", "durable-queue")
        assert sp is not None
        wait_for(lambda: sp.start_offset == 5, what="0..4 accepted")
        c.close()
    with EmbeddedBroker(CONFIG, log_dir=tmp_path) as broker:
        again = consumer(broker, "sg-restart", **{"share.acknowledgement.mode": "explicit"})
        again.subscribe(["durable-queue"])
        got: dict[int, int] = {}
        try:
            deadline = time.monotonic() + 30
            while len(got) < 5 and time.monotonic() < deadline:
                for m in again.poll(0.1):
                    got[m.offset()] = m.delivery_count()
                    again.acknowledge(m, AcknowledgeType.ACCEPT)
                again.commit_sync(10)
            assert sorted(got) == [5, 6, 7, 8, 9]  # only what was not acknowledged
            # released by the close before the restart, which counts no delivery (Kafka's
            # DeliveryCountOps.DECREASE): their delivery count survived the restart as 0
            assert set(got.values()) == {1}
            sp = share_partition(broker, "sg-restart", "durable-queue")
            assert sp is not None
            wait_for(lambda: sp.start_offset == 10, what="everything accepted")
        finally:
            again.close()


def test_group_configs_set_share_auto_offset_reset_and_survive_a_restart(
        tmp_path: Path) -> None:
    group = "sg-earliest"
    with EmbeddedBroker(CONFIG, log_dir=tmp_path) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("early", 1, 1)])["early"].result(10)
        p = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(7):  # before any member: "latest" would never deliver these
            p.produce("early", str(i).encode(), partition=0)
        p.flush(10)
        earliest = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest",
            incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([earliest]).values():
            f.result(10)
        bad = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
            "share.record.lock.duration.ms", "0", incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as refused:
            for f in admin.incremental_alter_configs([bad]).values():
                f.result(10)
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG
        c = consumer(broker, group)
        c.subscribe(["early"])
        got: list[int] = []
        deadline = time.monotonic() + 30
        while len(got) < 7 and time.monotonic() < deadline:
            got += [m.offset() for m in c.poll(0.1) if m.error() is None]
        c.close()
        assert sorted(got) == list(range(7))
    with EmbeddedBroker(CONFIG, log_dir=tmp_path) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        [f] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
        entries = f.result(10)
        reset = entries["share.auto.offset.reset"]
        assert (reset.value, reset.source) == ("earliest", ConfigSource.GROUP_CONFIG.value)
        lock = entries["share.record.lock.duration.ms"]
        assert (lock.value, lock.source) == (str(LOCK_MS), ConfigSource.DEFAULT_CONFIG.value)


def test_read_committed_share_groups_skip_aborted_records_and_wait_for_the_lso(
        broker: EmbeddedBroker) -> None:
    group, topic = "sg-committed", "txn-queue"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
    configs = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in (
        ("share.auto.offset.reset", "earliest"), ("share.isolation.level", "read_committed"))]
    for f in admin.incremental_alter_configs(
            [ConfigResource(ResourceType.GROUP, group, incremental_configs=configs)]).values():
        f.result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "tx-1"})
    p.init_transactions(10)
    for values, commit in ((b"abc", True), (b"xyz", False), (b"de", True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, bytes([v]), partition=0)
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(10)
    p.begin_transaction()  # left open: beyond the last stable offset
    p.produce(topic, b"!", partition=0)
    p.flush(10)
    c = consumer(broker, group)
    c.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            got += [m.value() for m in c.poll(0.1) if m.error() is None]
        assert sorted(got) == [b"a", b"b", b"c", b"d", b"e"]  # xyz aborted, ! not yet stable
        p.commit_transaction(10)
        deadline = time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            got += [m.value() for m in c.poll(0.1) if m.error() is None]
        assert got[-1] == b"!" and len(got) == 6
    finally:
        c.close()
