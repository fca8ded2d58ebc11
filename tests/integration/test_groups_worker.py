"""A consumer-group member in its own process, for test_groups.py (no tests here).

    python test_groups_worker.py CLIENT BOOTSTRAP TOPIC GROUP SESSION_MS

Consumes with subscribe(), commits every record synchronously *before* reporting it, and
writes JSON lines to stdout: {"assigned": [partitions]} after every rebalance and
{"p": partition, "o": offset} per committed record. Runs until killed or stdin closes.

Debugging: WORKER_LOG=INFO sets the root log level, WORKER_DEBUG=kafka.coordinator,... turns
chosen loggers to DEBUG, and the test side's WORKER_LOG_DIR keeps each worker's stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading


def emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _watch_stdin(stop: threading.Event) -> None:
    sys.stdin.read()  # EOF: the test wants a graceful leave
    stop.set()


def run_confluent(
    bootstrap: str, topic: str, group: str, session: int, stop: threading.Event
) -> None:
    import confluent_kafka

    c = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": session,
            "heartbeat.interval.ms": max(100, session // 6),
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    c.subscribe(
        [topic], on_assign=lambda _c, ps: emit({"assigned": sorted(p.partition for p in ps)})
    )
    while not stop.is_set():
        m = c.poll(0.1)
        if m is None or m.error():
            continue
        try:
            c.commit(
                offsets=[confluent_kafka.TopicPartition(topic, m.partition(), m.offset() + 1)],
                asynchronous=False,
            )
        except confluent_kafka.KafkaException:
            continue  # fenced by a rebalance: the record is not ours any more
        emit({"p": m.partition(), "o": m.offset()})
    c.close()


def run_kafka_python(
    bootstrap: str, topic: str, group: str, session: int, stop: threading.Event
) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: object) -> None:
            pass

        def on_partitions_assigned(self, assigned: object) -> None:
            emit({"assigned": sorted(tp.partition for tp in assigned)})  # type: ignore[attr-defined]

    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=session,
        heartbeat_interval_ms=max(100, session // 6),
    )
    c.subscribe([topic], listener=Listener())
    while not stop.is_set():
        for tp, recs in c.poll(100).items():
            for r in recs:
                try:
                    c.commit({tp: OffsetAndMetadata(r.offset + 1, "", -1)})
                except KafkaError:
                    break
                emit({"p": tp.partition, "o": r.offset})
    c.close()


def run_aiokafka(
    bootstrap: str, topic: str, group: str, session: int, stop: threading.Event
) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import KafkaError

    # aiokafka rebalances in a background task and commits with the generation current at
    # send time, so a batch fetched before a rebalance could be committed under the next
    # generation. Like a Java consumer (which only rebalances inside poll), we drop a batch
    # once our partitions were revoked after it was fetched.
    revocations = [0]

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: object) -> None:
            revocations[0] += 1

        def on_partitions_assigned(self, assigned: object) -> None:
            emit({"assigned": sorted(tp.partition for tp in assigned)})  # type: ignore[attr-defined]

    async def main() -> None:
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=session,
            heartbeat_interval_ms=max(100, session // 6),
            metadata_max_age_ms=1000,
        )
        await c.start()
        c.subscribe([topic], listener=Listener())
        while not stop.is_set():
            batch = await c.getmany(timeout_ms=100)
            fetched_in = revocations[0]
            for tp, recs in batch.items():
                for r in recs:
                    if revocations[0] != fetched_in:
                        break  # this batch belongs to a previous generation
                    try:
                        await c.commit({tp: r.offset + 1})
                    except KafkaError:
                        break
                    emit({"p": tp.partition, "o": r.offset})
        await c.stop()

    asyncio.run(main())


RUNNERS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}

if __name__ == "__main__":
    import logging

    logging.basicConfig(
        level=getattr(logging, os.environ.get("WORKER_LOG", "WARNING")), stream=sys.stderr
    )
    for name in filter(None, os.environ.get("WORKER_DEBUG", "").split(",")):
        logging.getLogger(name).setLevel(logging.DEBUG)
    client, bootstrap, topic, group, session = sys.argv[1:6]
    stop = threading.Event()
    threading.Thread(target=_watch_stdin, args=(stop,), daemon=True).start()
    RUNNERS[client](bootstrap, topic, group, int(session), stop)
    emit({"closed": True})
