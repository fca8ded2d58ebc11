"""End to end: a compacted topic on a real broker, produced and consumed with librdkafka
(confluent-kafka). After the cleaner runs, a consumer from the beginning sees the latest
value of every key at its original offset, fewer records than were produced, and reads
cleanly through the rebuilt batches and empty headers."""

from __future__ import annotations

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition


def _consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "cleaner-e2e",
                     "auto.offset.reset": "earliest", "enable.partition.eof": True,
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    out: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        for _ in range(10_000):  # bounded: ends at the partition EOF event
            m = c.poll(10)
            assert m is not None, "no message or EOF within 10 s"
            err = m.error()
            if err is not None:
                assert err.code() == ck.KafkaError._PARTITION_EOF, err
                break
            offset = m.offset()
            assert offset is not None
            out.append((offset, m.key(), m.value()))
    finally:
        c.close()
    return out


def test_compacted_topic_through_the_broker() -> None:
    with EmbeddedBroker({"log.cleaner.threads": "0"}) as b:  # the test drives the cleaner
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        configs = {"cleanup.policy": "compact", "segment.bytes": "16384",
                   "min.cleanable.dirty.ratio": "0.01"}
        admin.create_topics([NewTopic("compacted", 1, 1, config=configs)])["compacted"].result(30)
        p = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "batch.size": 4096,
                         "linger.ms": 5, "compression.type": "lz4", "acks": "all"})
        latest: dict[bytes, bytes | None] = {}
        for i in range(3000):
            key = b"key-%03d" % (i % 100)
            value = None if i % 97 == 0 else b"value-%05d" % i
            p.produce("compacted", key=key, value=value, partition=0)
            latest[key] = value
        assert p.flush(30) == 0

        before = _consume_all(b.bootstrap_servers, "compacted")
        assert len(before) == 3000
        manager = b.broker.replica_manager.logs
        lg = manager.get_log(TopicPartition("compacted", 0))
        assert lg.number_of_segments() > 2
        assert manager.cleaner.clean_once()

        after = _consume_all(b.bootstrap_servers, "compacted")
        assert len(after) < 1000
        offsets = [o for o, _k, _v in after]
        assert offsets == sorted(set(offsets))
        original = {o: (k, v) for o, k, v in before}
        assert all(original[o] == (k, v) for o, k, v in after)  # same offsets, same contents
        got = {k: v for _o, k, v in after}
        assert got == latest  # tombstones stay for delete.retention.ms (1 day)
