"""An aborted transaction whose records fill more than one segment (librdkafka's
0129_fetch_aborted_msgs): its abort marker, and so its transaction index entry, is in the
last segment, yet a read_committed Fetch of the first segment must list it (Kafka's
collectAbortedTransactions searches the later segments too), or the consumer delivers the
aborted records it was sent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition as Tp

TOPIC = "aborted-across-segments"
RECORDS, SIZE = 1500, 1000  # 1.5 MB: past one 1 MB segment


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"transaction.state.log.num.partitions": 1,
                         "offsets.topic.num.partitions": 1}) as b:
        yield b


def _abort_one_transaction(bootstrap: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": TOPIC,
                  "linger.ms": 100, "message.max.bytes": 10000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(RECORDS):
        p.produce(TOPIC, b"%06d" % i + b"x" * (SIZE - 6), partition=0)
    p.flush(30)
    p.abort_transaction(30)


def _read(bootstrap: str, isolation: str) -> tuple[int, int]:
    """Records read from the start until the end of the partition; the position reached."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{isolation}",
                  "isolation.level": isolation, "enable.partition.eof": True,
                  "fetch.max.bytes": 20000, "max.partition.fetch.bytes": 20000,
                  "message.max.bytes": 10000})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    count = 0
    try:
        while True:
            m = c.poll(30)
            assert m is not None, "no end of partition within 30 s"
            err = m.error()
            if err is None:
                count += 1
            elif err.code() == KafkaError._PARTITION_EOF:
                return count, m.offset() or 0
            else:
                raise AssertionError(err)
    finally:
        c.close()


def test_read_committed_skips_an_abort_indexed_in_a_later_segment(broker: EmbeddedBroker) -> None:
    broker.broker.replica_manager.create_topic(
        TOPIC, 1, {"segment.bytes": "1048576", "max.message.bytes": "10000"})
    _abort_one_transaction(broker.bootstrap_servers)
    log = broker.broker.replica_manager.get_log(Tp(TOPIC, 0))
    segments = list(log.segments)
    assert len(segments) >= 2, "the transaction did not roll the log"
    assert segments[0].txn_index.is_empty and not segments[-1].txn_index.is_empty
    assert _read(broker.bootstrap_servers, "read_uncommitted") == (RECORDS, RECORDS + 1)
    assert _read(broker.bootstrap_servers, "read_committed") == (0, RECORDS + 1)
