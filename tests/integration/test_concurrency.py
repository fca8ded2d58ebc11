"""Several producers and long-polling consumers at once on one broker: every record arrives
once, in per-partition order, while consumers wait in the purgatory between appends."""

from __future__ import annotations

import threading

import confluent_kafka as ck

PARTITIONS = 3
PER_PRODUCER = 3000


def test_concurrent_producers_and_tailing_consumers(serve) -> None:  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = serve.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})  # keep a reference until the result
    admin.create_topics([NewTopic("conc", PARTITIONS, 1)])["conc"].result()
    received: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    done = threading.Event()
    errors: list[object] = []

    def tail(partition: int) -> None:
        # started before any record exists: it long-polls and is woken by appends
        c = ck.Consumer(
            {
                "bootstrap.servers": bs,
                "group.id": f"tail-{partition}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 500,
            }
        )
        c.assign([ck.TopicPartition("conc", partition, 0)])
        try:
            while len(received[partition]) < PER_PRODUCER and not done.is_set():
                for m in c.consume(500, 1):
                    if m.error():
                        errors.append(m.error())
                    else:
                        received[partition].append(m.value())
        finally:
            c.close()

    def produce(partition: int) -> None:
        p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 2, "enable.idempotence": True})
        for i in range(PER_PRODUCER):
            p.produce("conc", f"{partition}:{i}".encode(), partition=partition)
            if i % 500 == 0:
                p.poll(0)
        if p.flush(60) != 0:
            errors.append(f"producer {partition} did not flush")

    tails = [threading.Thread(target=tail, args=(p,)) for p in range(PARTITIONS)]
    producers = [threading.Thread(target=produce, args=(p,)) for p in range(PARTITIONS)]
    for t in tails + producers:
        t.start()
    for t in producers:
        t.join(120)
    for t in tails:
        t.join(60)
    done.set()
    assert not errors, errors[:5]
    for p in range(PARTITIONS):
        assert received[p] == [f"{p}:{i}".encode() for i in range(PER_PRODUCER)], p
