"""One produce / consume / admin adapter per real client, so every test runs the same
scenario through confluent-kafka, kafka-python, aiokafka and kcat."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

CLIENTS = ("confluent", "kafka-python", "aiokafka", "kcat")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int
    offset: int = -1

    def content(self) -> tuple[object, ...]:
        return (self.key, self.value, self.headers, self.timestamp)


def make_records(tag: str, n: int, base_ts: int) -> list[Rec]:
    return [
        Rec(
            f"k-{tag}-{i}".encode(),
            f"value {tag} {i} ".encode() * (1 + i % 7),
            (("h1", f"x{i}".encode()), ("h2", b"y")) if i % 2 == 0 else (),
            base_ts + i,
        )
        for i in range(n)
    ]


# -- produce ----------------------------------------------------------------------------------
def produce(
    client: str,
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    *,
    acks: str = "all",
    codec: str = "none",
    idempotent: bool = False,
    partition: int = 0,
) -> None:
    fn = {
        "confluent": _produce_confluent,
        "kafka-python": _produce_kafka_python,
        "aiokafka": _produce_aiokafka,
        "kcat": _produce_kcat,
    }[client]
    fn(bootstrap, topic, recs, acks, codec, idempotent, partition)


def _produce_confluent(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    acks: str,
    codec: str,
    idempotent: bool,
    partition: int,
) -> None:
    import confluent_kafka

    errors: list[object] = []
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "compression.type": codec,
            "enable.idempotence": idempotent,
            "linger.ms": 5,
        }
    )
    for r in recs:
        p.produce(
            topic,
            r.value,
            r.key,
            partition=partition,
            timestamp=r.timestamp,
            headers=list(r.headers),
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
    assert p.flush(30) == 0
    assert not errors, errors


def _produce_kafka_python(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    acks: str,
    codec: str,
    idempotent: bool,
    partition: int,
) -> None:
    import kafka

    ack: object = "all" if acks == "all" else int(acks)
    p = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=ack,
        compression_type=None if codec == "none" else codec,
        enable_idempotence=idempotent,
        linger_ms=5,
    )
    futs = [
        p.send(
            topic,
            value=r.value,
            key=r.key,
            partition=partition,
            timestamp_ms=r.timestamp,
            headers=list(r.headers),
        )
        for r in recs
    ]
    p.flush(30)
    for f in futs:
        f.get(30)
    p.close(5)


def _produce_aiokafka(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    acks: str,
    codec: str,
    idempotent: bool,
    partition: int,
) -> None:
    import aiokafka

    async def go() -> None:
        ack: object = "all" if acks == "all" else int(acks)
        p = aiokafka.AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks=ack,
            compression_type=None if codec == "none" else codec,
            enable_idempotence=idempotent,
            linger_ms=5,
        )
        await p.start()
        try:
            futs = [
                await p.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    partition=partition,
                    timestamp_ms=r.timestamp,
                    headers=list(r.headers),
                )
                for r in recs
            ]
            for f in futs:
                await f
        finally:
            await p.stop()

    asyncio.run(go())


def _produce_kcat(
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    acks: str,
    codec: str,
    idempotent: bool,
    partition: int,
) -> None:
    # kcat cannot set per-message headers/timestamps from stdin lines; one call per record
    # with -H gives headers, and the create time is the producer's clock.
    for r in recs:
        cmd = [
            "kcat",
            "-P",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            str(partition),
            "-K",
            "\t",
            "-X",
            f"acks={acks}",
            "-z",
            codec,
            "-X",
            f"enable.idempotence={str(idempotent).lower()}",
        ]
        for k, v in r.headers:
            cmd += ["-H", f"{k}={v.decode()}"]
        line = (r.key or b"") + b"\t" + (r.value or b"")
        subprocess.run(cmd, input=line, check=True, timeout=60, capture_output=True)


# -- consume ----------------------------------------------------------------------------------
def consume(
    client: str,
    bootstrap: str,
    topic: str,
    n: int,
    *,
    start: str | int = "beginning",
    timestamp: int | None = None,
    partition: int = 0,
) -> list[Rec]:
    """``n`` records from ``partition`` with assign + seek (beginning, an offset, or the first
    offset at/after ``timestamp``)."""
    fn = {
        "confluent": _consume_confluent,
        "kafka-python": _consume_kafka_python,
        "aiokafka": _consume_aiokafka,
        "kcat": _consume_kcat,
    }[client]
    return fn(bootstrap, topic, n, start, timestamp, partition)


def _consume_confluent(
    bootstrap: str, topic: str, n: int, start: str | int, timestamp: int | None, partition: int
) -> list[Rec]:
    import confluent_kafka as ck

    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        if timestamp is not None:
            off = c.offsets_for_times([ck.TopicPartition(topic, partition, timestamp)], 10)[
                0
            ].offset
        else:
            off = ck.OFFSET_BEGINNING if start == "beginning" else int(start)
        c.assign([ck.TopicPartition(topic, partition, off)])
        out: list[Rec] = []
        while len(out) < n:
            msgs = c.consume(n - len(out), 10)
            assert msgs, f"confluent: timed out after {len(out)} of {n}"
            for m in msgs:
                assert m.error() is None, m.error()
                out.append(
                    Rec(m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1], m.offset())
                )
        return out
    finally:
        c.close()


def _consume_kafka_python(
    bootstrap: str, topic: str, n: int, start: str | int, timestamp: int | None, partition: int
) -> list[Rec]:
    import kafka

    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = kafka.TopicPartition(topic, partition)
        c.assign([tp])
        if timestamp is not None:
            c.seek(tp, c.offsets_for_times({tp: timestamp})[tp].offset)
        elif start == "beginning":
            c.seek_to_beginning(tp)
        else:
            c.seek(tp, int(start))
        out: list[Rec] = []
        while len(out) < n:
            batch = c.poll(10000, max_records=n - len(out))
            assert batch, f"kafka-python: timed out after {len(out)} of {n}"
            for m in batch.get(tp, []):
                out.append(Rec(m.key, m.value, tuple(m.headers or ()), m.timestamp, m.offset))
        return out
    finally:
        c.close()


def _consume_aiokafka(
    bootstrap: str, topic: str, n: int, start: str | int, timestamp: int | None, partition: int
) -> list[Rec]:
    import aiokafka

    async def go() -> list[Rec]:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            tp = aiokafka.TopicPartition(topic, partition)
            c.assign([tp])
            if timestamp is not None:
                c.seek(tp, (await c.offsets_for_times({tp: timestamp}))[tp].offset)
            elif start == "beginning":
                await c.seek_to_beginning(tp)
            else:
                c.seek(tp, int(start))
            out: list[Rec] = []
            while len(out) < n:
                batch = await c.getmany(tp, timeout_ms=10000, max_records=n - len(out))
                assert batch, f"aiokafka: timed out after {len(out)} of {n}"
                for m in batch.get(tp, []):
                    out.append(Rec(m.key, m.value, tuple(m.headers or ()), m.timestamp, m.offset))
            return out
        finally:
            await c.stop()

    return asyncio.run(go())


def _consume_kcat(
    bootstrap: str, topic: str, n: int, start: str | int, timestamp: int | None, partition: int
) -> list[Rec]:
    if timestamp is not None:
        offset_arg = f"s@{timestamp}"
    else:
        offset_arg = "beginning" if start == "beginning" else str(start)
    cmd = [
        "kcat",
        "-C",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-p",
        str(partition),
        "-o",
        offset_arg,
        "-c",
        str(n),
        "-J",
        "-e",
    ]
    res = subprocess.run(cmd, check=True, timeout=60, capture_output=True)
    out = []
    for line in res.stdout.decode().splitlines():
        m = json.loads(line)
        hs = m.get("headers") or []
        headers = tuple((hs[i], hs[i + 1].encode()) for i in range(0, len(hs), 2))
        key = None if m.get("key") is None else m["key"].encode()
        value = None if m.get("payload") is None else m["payload"].encode()
        out.append(Rec(key, value, headers, int(m["ts"]), int(m["offset"])))
    assert len(out) == n, f"kcat: got {len(out)} of {n}: {res.stderr.decode()[-500:]}"
    return out
