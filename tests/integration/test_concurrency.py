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


def test_kafka_python_incremental_fetch_session_across_partitions(serve) -> None:  # type: ignore[no-untyped-def]
    """kafka-python opens a KIP-227 session; with small fetches it needs many incremental
    rounds over 3 partitions and must still get every record once, in order."""
    import kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = serve.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic("kp-session", 3, 1)])["kp-session"].result()
    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for part in range(3):
        for i in range(400):
            p.produce("kp-session", f"{part}:{i}".encode(), partition=part)
    assert p.flush(30) == 0
    c = kafka.KafkaConsumer(
        bootstrap_servers=bs,
        enable_auto_commit=False,
        max_partition_fetch_bytes=2048,
        fetch_max_bytes=4096,
    )
    tps = [kafka.TopicPartition("kp-session", part) for part in range(3)]
    c.assign(tps)
    c.seek_to_beginning()
    got: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    while sum(len(v) for v in got.values()) < 1200:
        batch = c.poll(10000)
        assert batch, f"stalled at {sum(len(v) for v in got.values())}"
        for tp, msgs in batch.items():
            got[tp.partition].extend(m.value for m in msgs)
    c.close()
    for part in range(3):
        assert got[part] == [f"{part}:{i}".encode() for i in range(400)]
