"""Group admin APIs through real admin clients, static membership, FindCoordinator batching,
and the internal topic on disk (readable by ``tidelog dump-log``)."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from test_groups_support import (
    KAFKA_PYTHON_FIRST_JOIN_DELAY_MS,
    Member,
    balanced,
    create_topic,
    produce,
    removals,
    session_timeouts,
    wait_for,
)

from tidelog.records import iter_batches
from tidelog.server.coordinator.group.records import (
    OFFSETS_TOPIC,
    GroupMetadataKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    partition_for,
)
from tidelog.testing.embedded import EmbeddedBroker

NUM_OFFSETS_PARTITIONS = 4
TOPIC = "adm-topic"


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(
        {
            "group.initial.rebalance.delay.ms": KAFKA_PYTHON_FIRST_JOIN_DELAY_MS,
            "group.min.session.timeout.ms": "500",
            "offsets.topic.num.partitions": str(NUM_OFFSETS_PARTITIONS),
        }
    ) as b:
        create_topic(b.bootstrap_servers, TOPIC, 4)
        produce(b.bootstrap_servers, TOPIC, 4, 5, "adm")
        yield b


def test_confluent_admin_client(broker: EmbeddedBroker) -> None:
    import confluent_kafka
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    bs = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    m = Member("confluent", bs, TOPIC, "adm-live", 3000)
    try:
        wait_for(lambda: len(m.committed) == 20, 60, "consumed", [m])
        listed = admin.list_consumer_groups().result(30)
        assert "adm-live" in {g.group_id for g in listed.valid}
        desc = admin.describe_consumer_groups(["adm-live"])["adm-live"].result(30)
        assert str(desc.state).endswith("STABLE") and len(desc.members) == 1
        assigned = {tp.partition for tp in desc.members[0].assignment.topic_partitions}
        assert assigned == {0, 1, 2, 3}
        offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("adm-live")])[
            "adm-live"
        ].result(30)
        assert {(tp.partition, tp.offset) for tp in offsets.topic_partitions} == {
            (p, 5) for p in range(4)
        }
        failed = admin.delete_consumer_groups(["adm-live"])["adm-live"]
        with pytest.raises(confluent_kafka.KafkaException, match="NON_EMPTY_GROUP"):
            failed.result(30)
    finally:
        m.leave()
    # an inactive group: offsets can be altered, then the group deleted
    tps = [TopicPartition(TOPIC, p, 2) for p in range(4)]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("adm-live", tps)])[
        "adm-live"
    ].result(30)
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("adm-live")])[
        "adm-live"
    ].result(30)
    assert {tp.offset for tp in offsets.topic_partitions} == {2}
    admin.delete_consumer_groups(["adm-live"])["adm-live"].result(30)
    assert "adm-live" not in {g.group_id for g in admin.list_consumer_groups().result(30).valid}


def test_kafka_python_admin_client(broker: EmbeddedBroker) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import MemberToRemove
    from kafka.errors import NoError
    from kafka.structs import TopicPartition

    bs = broker.bootstrap_servers
    members = [Member("kafka-python", bs, TOPIC, "adm-kp", 6000) for _ in range(2)]
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        wait_for(lambda: balanced(members, 4), 60, "split", members)
        wait_for(lambda: sum(len(m.committed) for m in members) == 20, 60, "consumed", members)
        assert {
            "group_id": "adm-kp",
            "protocol_type": "consumer",
            "group_state": "Stable",
            "group_type": "classic",
        } in admin.list_groups()
        d = admin.describe_groups(["adm-kp"])["adm-kp"]
        assert d["group_state"] == "Stable" and d["protocol_data"] in ("range", "roundrobin")
        owned = sorted(
            p
            for m in d["members"]
            for a in m["member_assignment"]["assigned_partitions"]
            for p in a["partitions"]
        )
        assert owned == [0, 1, 2, 3]
        offsets = admin.list_group_offsets({"adm-kp": None})["adm-kp"]
        assert {tp: o.offset for tp, o in offsets.items()} == {
            TopicPartition(TOPIC, p): 5 for p in range(4)
        }
        # the group is busy with TOPIC: its offsets cannot be deleted
        res = admin.delete_group_offsets("adm-kp", [TopicPartition(TOPIC, 0)])
        assert res[TopicPartition(TOPIC, 0)].__name__ == "GroupSubscribedToTopicError"
        # LeaveGroup v3+ with a batch: both members removed by an admin at once
        ids = [m["member_id"] for m in d["members"]]
        removed = admin.remove_group_members(
            "adm-kp", [MemberToRemove(member_id=i) for i in [*ids, "nobody"]]
        )
        errors = {getattr(k, "member_id", k): v for k, v in removed.items()}
        assert errors[ids[0]] is NoError and errors[ids[1]] is NoError
        assert errors["nobody"].__name__ == "UnknownMemberIdError"
    finally:
        for m in members:
            m.stop()
    state = admin.describe_groups(["adm-kp"])["adm-kp"]["group_state"]
    assert state in ("Empty", "PreparingRebalance"), state
    wait_for(
        lambda: admin.describe_groups(["adm-kp"])["adm-kp"]["group_state"] == "Empty",
        30,
        "empty",
        [],
    )
    res = admin.delete_group_offsets("adm-kp", [TopicPartition(TOPIC, 0)])
    assert res[TopicPartition(TOPIC, 0)] is NoError
    assert TopicPartition(TOPIC, 0) not in admin.list_group_offsets({"adm-kp": None})["adm-kp"]
    admin.delete_groups(["adm-kp"])
    assert "adm-kp" not in {g["group_id"] for g in admin.list_groups()}
    admin.close()


def test_static_member_restart_keeps_assignment_without_rebalance(broker: EmbeddedBroker) -> None:
    import confluent_kafka

    bs = broker.bootstrap_servers
    group = "adm-static"

    def consumer(instance: str) -> confluent_kafka.Consumer:
        c = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": group,
                "group.instance.id": instance,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 200,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        c.subscribe([TOPIC])
        return c

    def wait_assigned(cs: list[confluent_kafka.Consumer], total: int) -> None:
        deadline = time.monotonic() + 60
        while sum(len(c.assignment()) for c in cs) != total or not all(c.assignment() for c in cs):
            assert time.monotonic() < deadline, [c.assignment() for c in cs]
            for c in cs:
                c.poll(0.05)

    a, b = consumer("inst-a"), consumer("inst-b")
    wait_assigned([a, b], 4)
    before = sorted(tp.partition for tp in b.assignment())
    gen_before = _generation(broker, group)
    b.close()  # a static member's close does not send LeaveGroup (KIP-345)
    b = consumer("inst-b")
    wait_assigned([a, b], 4)
    assert sorted(tp.partition for tp in b.assignment()) == before
    assert _generation(broker, group) == gen_before  # no rebalance happened
    a.close()
    b.close()


def _generation(broker: EmbeddedBroker, group: str) -> int:
    async def get() -> int:
        from tidelog.server.coordinator.group.wiring import coordinator_for

        return coordinator_for(broker.broker).groups[group].generation_id

    return int(broker.run(get()))


def test_find_coordinator_batched_keys(broker: EmbeddedBroker) -> None:
    from tidelog.client.kafka_client import KafkaClient

    with KafkaClient(broker.bootstrap_servers) as c:
        conn = c.any_connection()
        resp = conn.call(10, 4, {"key_type": 0, "coordinator_keys": ["g1", "g2", ""]})
        by_key = {x.key: x for x in resp.coordinators}
        assert int(by_key["g1"].error_code) == 0 and int(by_key["g1"].port) == broker.port
        assert int(by_key["g2"].node_id) == int(by_key["g1"].node_id)
        assert int(by_key[""].error_code) != 0
        txn = conn.call(10, 3, {"key": "tx", "key_type": 1})
        assert int(txn.error_code) == 0 and int(txn.port) == broker.port  # the txn coordinator


def test_consumer_offsets_segments_hold_kafka_records(broker: EmbeddedBroker) -> None:
    from tidelog.client.kafka_client import KafkaClient
    from tidelog.client.kafka_client import TopicPartition as TP

    group = "adm-dump"
    with KafkaClient(broker.bootstrap_servers) as c:
        for o in (1, 2, 3):
            c.commit_offsets(group, {TP(TOPIC, 0): o})
    part = partition_for(group, NUM_OFFSETS_PARTITIONS)
    seg = broker.log_dir / f"{OFFSETS_TOPIC}-{part}" / "00000000000000000000.log"
    records = [
        (decode_key(r.key), r.value)
        for b in iter_batches(seg.read_bytes())
        for r in b.iter_records()
        if r.key is not None
    ]
    mine = [
        decode_offset_value(v).offset
        for k, v in records
        if isinstance(k, OffsetKey) and k.group == group and v is not None
    ]
    assert mine == [1, 2, 3]
    assert all(isinstance(k, OffsetKey | GroupMetadataKey) for k, _ in records)
    for k, v in records:
        if isinstance(k, GroupMetadataKey) and v is not None:
            decode_group_value(v)  # every group record parses with Kafka's schema
    batches = list(iter_batches(seg.read_bytes()))
    out = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "dump-log", "--print-data-log", str(seg)],
        capture_output=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout.decode("utf-8", "replace")
    assert text.count("baseOffset:") == len(batches) == text.count("isvalid: true")
    assert text.count("| offset:") == len(records)
    key_sizes = [len(r.key) for b in batches for r in b.iter_records() if r.key is not None]
    assert [int(x.split()[0]) for x in text.split("keySize: ")[1:]] == key_sizes


def test_aiokafka_crash_moves_partitions_after_short_session(
        broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture) -> None:
    """A 1.5 s session: the coordinator holds the members to it and removes the crashed one
    when it expires (its decision, not a wall-clock bound); its partitions move."""
    caplog.set_level(logging.INFO, logger="tidelog.server.coordinator.group")
    bs = broker.bootstrap_servers
    members = [Member("aiokafka", bs, TOPIC, "adm-crash", 1500) for _ in range(2)]
    try:
        wait_for(lambda: balanced(members, 4), 60, "split", members)
        sessions = session_timeouts(broker, "adm-crash")
        assert list(sessions.values()) == [1500, 1500], sessions
        members[0].kill()
        wait_for(lambda: balanced(members[1:], 4), 30, "failover", members[1:])
        [(crashed_id, why)] = removals(caplog, "adm-crash")
        assert why == "session timeout expired" and crashed_id in sessions
    finally:
        for m in members:
            m.stop()


def test_live_broker_compacts_consumer_offsets(tmp_path: object) -> None:
    """The broker's own cleaner thread compacts __consumer_offsets while clients commit."""
    from pathlib import Path

    from tidelog.client.kafka_client import KafkaClient
    from tidelog.client.kafka_client import TopicPartition as TP

    config = {
        "offsets.topic.num.partitions": "1",
        "offsets.topic.segment.bytes": "2048",
        "log.cleaner.backoff.ms": "20",
    }
    with EmbeddedBroker(config, log_dir=Path(str(tmp_path))) as b:
        create_topic(b.bootstrap_servers, "t", 2)
        with KafkaClient(b.bootstrap_servers) as c:
            for o in range(300):
                c.commit_offsets("compact-me", {TP("t", 0): o, TP("t", 1): o})
        part_dir = b.log_dir / f"{OFFSETS_TOPIC}-0"

        def size() -> int:
            total = 0
            for p in part_dir.glob("*.log"):
                try:
                    total += p.stat().st_size
                except FileNotFoundError:  # the cleaner swapped it meanwhile
                    return 1 << 30
            return total

        written = 300 * 2 * 40  # ~40 bytes of key+value per record, before compaction
        wait_for(lambda: size() < written / 4, 60, "compaction", [])
        with KafkaClient(b.bootstrap_servers) as c:
            got = c.committed_offsets("compact-me", [TP("t", 0), TP("t", 1)])
        assert got == {TP("t", 0): 299, TP("t", 1): 299}
