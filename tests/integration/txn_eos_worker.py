"""A consume-transform-produce worker (confluent-kafka), run as its own process so tests can
SIGKILL it: reads ``src`` under read_committed from the group's committed offsets, writes
each record to ``dst`` and the new offsets in one transaction per poll, exits 0 once every
partition's committed position reaches ``src``'s end. Any error exits non-zero: the next
run's InitProducerId fences this one and aborts whatever it left open.

usage: txn_eos_worker.py BOOTSTRAP SRC DST GROUP TRANSACTIONAL_ID PARTITIONS"""

from __future__ import annotations

import os
import sys
import threading

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

STUCK_S = 6


def main(bootstrap: str, src: str, dst: str, group: str, tid: str, n: int) -> None:
    debug = {"debug": os.environ["TXN_WORKER_DEBUG"]} if "TXN_WORKER_DEBUG" in os.environ else {}
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 60000, "linger.ms": 5, **debug})
    p.init_transactions(120)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    committed = c.committed([TopicPartition(src, i) for i in range(n)], 120)
    positions = {tp.partition: max(tp.offset, 0) for tp in committed}
    c.assign([TopicPartition(src, i, o if o > 0 else OFFSET_BEGINNING)
              for i, o in positions.items()])
    ends = {i: c.get_watermark_offsets(TopicPartition(src, i), 120)[1] for i in range(n)}
    print("start", sum(positions.values()), flush=True)
    while any(positions[i] < ends[i] for i in range(n)):
        msgs = [m for m in c.consume(50, 0.5) if m.error() is None]
        if not msgs:
            continue
        # librdkafka 2.x can leave send_offsets_to_transaction waiting forever on a stale
        # group-coordinator cache entry after the broker restarts (and ignores its timeout:
        # librdkafka issues 5456/5511); a stuck cycle exits so the harness starts a new
        # worker, whose InitProducerId fences this one.
        watchdog = threading.Timer(STUCK_S, lambda: os._exit(3))
        watchdog.start()
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, key=m.key(), value=m.value(), partition=m.partition())
            positions[m.partition()] = m.offset() + 1
        p.send_offsets_to_transaction(
            [TopicPartition(src, i, o) for i, o in positions.items()],
            c.consumer_group_metadata(), 60)
        p.commit_transaction(60)
        watchdog.cancel()
        print("committed", sum(positions.values()), flush=True)
    print("done", flush=True)
    c.close()


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], a[2], a[3], a[4], int(a[5]))
