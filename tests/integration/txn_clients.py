"""Transactional producers and read_committed consumers of the three Python clients, one
adapter each, so every transaction test runs the same scenario through all of them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

PRODUCERS = ("confluent", "kafka-python", "aiokafka")
Msg = tuple[str, int, bytes]  # topic, partition, value
Txn = tuple[list[Msg], bool]  # records, commit?


def run_transactions(client: str, bootstrap: str, tid: str, txns: Sequence[Txn],
                     offsets: dict[tuple[str, int], int] | None = None,
                     group: str | None = None) -> None:
    """Each transaction in order; ``offsets`` go into the last one for ``group``."""
    {"confluent": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka}[client](
        bootstrap, tid, txns, offsets or {}, group)


def _confluent(bootstrap: str, tid: str, txns: Sequence[Txn],
               offsets: dict[tuple[str, int], int], group: str | None) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    for i, (msgs, commit) in enumerate(txns):
        p.begin_transaction()
        for topic, part, value in msgs:
            p.produce(topic, value=value, partition=part)
        if offsets and group and i == len(txns) - 1:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
            p.send_offsets_to_transaction(
                [TopicPartition(t, q, o) for (t, q), o in offsets.items()],
                c.consumer_group_metadata(), 30)
            c.close()
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(30)
            p.abort_transaction(30)


def _kafka_python(bootstrap: str, tid: str, txns: Sequence[Txn],
                  offsets: dict[tuple[str, int], int], group: str | None) -> None:
    from kafka import KafkaProducer, OffsetAndMetadata, TopicPartition

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
    p.init_transactions()
    for i, (msgs, commit) in enumerate(txns):
        p.begin_transaction()
        for topic, part, value in msgs:
            p.send(topic, value=value, partition=part)
        if offsets and group and i == len(txns) - 1:
            p.send_offsets_to_transaction(
                {TopicPartition(t, q): OffsetAndMetadata(o, "", -1)
                 for (t, q), o in offsets.items()}, group)
        if commit:
            p.commit_transaction()
        else:
            p.flush()
            p.abort_transaction()
    p.close()


def _aiokafka(bootstrap: str, tid: str, txns: Sequence[Txn],
              offsets: dict[tuple[str, int], int], group: str | None) -> None:
    from aiokafka import AIOKafkaProducer, TopicPartition

    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
        await p.start()
        try:
            for i, (msgs, commit) in enumerate(txns):
                await p.begin_transaction()
                futs = [await p.send(t, value=v, partition=q) for t, q, v in msgs]
                await asyncio.gather(*futs)
                if offsets and group and i == len(txns) - 1:
                    await p.send_offsets_to_transaction(
                        {TopicPartition(t, q): o for (t, q), o in offsets.items()}, group)
                if commit:
                    await p.commit_transaction()
                else:
                    await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(go())


# -- consumers ---------------------------------------------------------------------------------
def read_all(client: str, bootstrap: str, tps: Sequence[tuple[str, int]], *,
             committed: bool, expect: int, timeout: float = 30) -> list[Msg]:
    """Assign ``tps`` from the beginning (no group) and read until ``expect`` records came,
    then a little longer to catch extras; read_committed when ``committed``."""
    fn = {"confluent": _read_confluent, "kafka-python": _read_kafka_python,
          "aiokafka": _read_aiokafka}[client]
    return fn(bootstrap, tps, committed, expect, timeout)


def _read_confluent(bootstrap: str, tps: Sequence[tuple[str, int]], committed: bool,
                    expect: int, timeout: float) -> list[Msg]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit":
                  False, "isolation.level": "read_committed" if committed else
                  "read_uncommitted", "enable.partition.eof": True})
    c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in tps])
    out: list[Msg] = []
    eof: set[tuple[str, int]] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (len(out) >= expect and len(eof) == len(tps)):
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                eof.add((m.topic(), m.partition()))
            continue
        eof.discard((m.topic(), m.partition()))
        out.append((m.topic(), m.partition(), m.value()))
    c.close()
    return out


def _read_kafka_python(bootstrap: str, tps: Sequence[tuple[str, int]], committed: bool,
                       expect: int, timeout: float) -> list[Msg]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      isolation_level="read_committed" if committed else "read_uncommitted")
    parts = [TopicPartition(t, p) for t, p in tps]
    c.assign(parts)
    c.seek_to_beginning()
    ends = c.end_offsets(parts)
    out: list[Msg] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for tp, recs in c.poll(200).items():
            out.extend((tp.topic, tp.partition, r.value) for r in recs)
        if len(out) >= expect and all(c.position(tp) >= ends[tp] for tp in parts):
            break
    c.close()
    return out


def _read_aiokafka(bootstrap: str, tps: Sequence[tuple[str, int]], committed: bool,
                   expect: int, timeout: float) -> list[Msg]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go() -> list[Msg]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             isolation_level="read_committed" if committed
                             else "read_uncommitted")
        await c.start()
        out: list[Msg] = []
        try:
            parts = [TopicPartition(t, p) for t, p in tps]
            c.assign(parts)
            await c.seek_to_beginning()
            ends = await c.end_offsets(parts)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                got = await c.getmany(timeout_ms=200)
                for tp, recs in got.items():
                    out.extend((tp.topic, tp.partition, r.value) for r in recs)
                positions = [await c.position(tp) for tp in parts]
                if len(out) >= expect and all(
                        pos >= ends[tp] for pos, tp in zip(positions, parts, strict=True)):
                    break
        finally:
            await c.stop()
        return out

    return asyncio.run(go())


def committed_offsets(bootstrap: str, group: str, tps: Sequence[tuple[str, int]]) -> dict[
        tuple[str, int], int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    got = c.committed([TopicPartition(t, p) for t, p in tps], 10)
    c.close()
    return {(tp.topic, tp.partition): tp.offset for tp in got}


def lso(bootstrap: str, topic: str, partition: int) -> int:
    """ListOffsets latest under read_committed: the last stable offset."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    tp = TopicPartition(topic, partition)
    end: Any = c.end_offsets([tp])[tp]
    c.close()
    return int(end)


def zombie_is_fenced(client: str, bootstrap: str, tid: str, topic: str) -> bool:
    """A producer opens a transaction; a second one with the same id initializes and
    commits; the first one's commit must fail. True when it did."""
    if client == "kafka-python":
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        zombie = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(topic, value=b"zombie", partition=0).get(30)
        run_transactions("kafka-python", bootstrap, tid, [([(topic, 0, b"fresh")], True)])
        try:
            zombie.commit_transaction()
            return False
        except KafkaError:
            return True
        finally:
            zombie.close(timeout=5)

    async def go() -> bool:
        from aiokafka import AIOKafkaProducer
        from aiokafka.errors import KafkaError

        zombie = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid)
        await zombie.start()
        try:
            await zombie.begin_transaction()
            await (await zombie.send(topic, value=b"zombie", partition=0))
            await asyncio.to_thread(run_transactions, "aiokafka", bootstrap, tid,
                                    [([(topic, 0, b"fresh")], True)])
            try:
                await zombie.commit_transaction()
                return False
            except KafkaError:
                return True
        finally:
            await asyncio.wait_for(zombie.stop(), 10)

    return asyncio.run(go())
