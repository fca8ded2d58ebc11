"""ListOffsets by timestamp finds nothing at or past what the asker may fetch: the LSO under
read_committed, the high watermark otherwise (Kafka's Partition.fetchOffsetForTimestamp).
An open transaction's records are found by a read_uncommitted lookup only."""

from __future__ import annotations

import time
from typing import Any

from broker_wire import Wire
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.protocol.codec import request_class
from tidelog.protocol.kio_util import make, nested
from tidelog.testing import EmbeddedBroker

TOPIC = "lo-fetchable"


def _lookup(w: Wire, ts: int, isolation: int) -> int:
    cls = request_class(2, 7)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    body = make(cls, replica_id=-1, isolation_level=isolation, topics=(
        make(tcls, name=TOPIC, partitions=(make(pcls, partition_index=0, timestamp=ts,
                                                current_leader_epoch=-1),)),))
    resp: Any = w.call(2, 7, body=body)
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0
    return int(part.offset)


def test_timestamp_lookup_stops_at_the_last_stable_offset() -> None:
    with EmbeddedBroker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(timeout=30)
        plain = Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(3):
            plain.produce(TOPIC, b"c%d" % i, partition=0, timestamp=1_000 + i)
        plain.flush(30)
        txn = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "lo-t"})
        deadline = time.monotonic() + 60
        while True:  # __transaction_state may still be loading right after creation
            try:
                txn.init_transactions(30)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
        txn.begin_transaction()
        txn.produce(TOPIC, b"open", partition=0, timestamp=5_000)
        txn.flush(30)  # written, never committed: the LSO stays at 3
        with Wire(b) as w:
            assert _lookup(w, 1_001, isolation=1) == 1
            assert _lookup(w, 4_000, isolation=0) == 3  # the open record, below the HW
            assert _lookup(w, 4_000, isolation=1) == -1  # past the LSO
            assert _lookup(w, -3, isolation=1) == -1  # max timestamp is the open record's
            assert _lookup(w, -1, isolation=1) == 3
        txn.abort_transaction(30)
