"""Exactly-once writes with ``kafka.transactional.id`` (a tidelog extension: Spark's Kafka
sink is at-least-once only).

Each Spark task writes its rows in one Kafka transaction, through its own librdkafka producer
whose transactional id is ``<kafka.transactional.id>-<Spark partition id>``: a retried or
speculative attempt of the same task re-initialises that id, which fences the older attempt
and aborts whatever it left open (Kafka's InitProducerId).

In a streaming query the transaction also commits a marker, atomically with the rows: the
offset ``batchId + 1`` of a consumer group named after the query id and the Spark partition
(``<kafka.transactional.id>-<query id>-<partition id>``), through ``send_offsets_to_transaction``
(TxnOffsetCommit). Spark re-runs a micro-batch whose commit it did not record (a crash or a
kill between the sink's commit and the checkpoint's commit log, a restarted query) with the
same offsets, so the same rows reach the same Spark partition; the task finds its marker at
or past the batch and writes nothing. Readers using ``isolation.level=read_committed`` see
every input row exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .options import WriteOptions

if TYPE_CHECKING:
    from confluent_kafka import Producer

# TaskContext local properties set by Spark's micro-batch execution (StreamExecution)
QUERY_ID_KEY = "sql.streaming.queryId"
BATCH_ID_KEY = "streaming.sql.batchId"

def _task() -> tuple[int, str | None, int | None]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("transactional writes run inside Spark tasks")
    batch = ctx.getLocalProperty(BATCH_ID_KEY)
    return ctx.partitionId(), ctx.getLocalProperty(QUERY_ID_KEY), None if batch is None else int(batch)


def _producer(opts: WriteOptions, transactional_id: str, on_error: Callable[[Any, Any], None]) -> Producer:
    """A transactional producer for this task, initialised (which fences any older producer
    with the same id and aborts what it left open). Not cached across tasks: the next task of
    this Spark partition may run in another Python worker, whose InitProducerId would fence a
    cached one here."""
    from confluent_kafka import Producer

    conf: dict[str, Any] = dict(opts.producer)
    conf.update({"transactional.id": transactional_id, "delivery.report.only.error": True,
                 "on_delivery": on_error})
    conf.setdefault("client.id", "tidelog-spark-writer")
    producer = Producer(conf)
    producer.init_transactions(60)
    return producer


def _marker(opts: WriteOptions, group: str, topic: str) -> tuple[Any, int]:
    """The marker group's consumer (for its group metadata) and the next batch id it records."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": opts.bootstrap_servers, "group.id": group,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    committed = consumer.committed([TopicPartition(topic, 0)], timeout=60)[0].offset
    return consumer, max(committed, 0)


def produce_transactionally(
    opts: WriteOptions,
    batches: Iterator[pa.RecordBatch],
    send_batch: Callable[[Any, pa.RecordBatch, str | None], int],
    failures: list[str],
    on_error: Callable[[Any, Any], None],
) -> int:
    """Rows written (0 when this task's part of the micro-batch was committed before)."""
    from confluent_kafka import TopicPartition

    prefix = opts.kafka["transactional.id"]
    partition_id, query_id, batch_id = _task()
    producer = _producer(opts, f"{prefix}-{partition_id}", on_error)
    consumer = None
    if batch_id is not None and query_id is not None:
        assert opts.topic is not None  # checked when the query was planned
        consumer, next_batch = _marker(opts, f"{prefix}-{query_id}-{partition_id}", opts.topic)
        if next_batch > batch_id:
            consumer.close()
            return 0  # committed by an earlier run of this micro-batch: never twice
    failures.clear()
    producer.begin_transaction()
    try:
        records = sum(send_batch(producer, batch, opts.topic) for batch in batches)
        producer.flush(120)
        if failures:
            raise RuntimeError(f"writing to Kafka failed: {'; '.join(failures[:3])}")
        if consumer is not None:
            assert opts.topic is not None and batch_id is not None
            producer.send_offsets_to_transaction(
                [TopicPartition(opts.topic, 0, batch_id + 1)], consumer.consumer_group_metadata(), 60
            )
        producer.commit_transaction(120)
    except BaseException:
        producer.abort_transaction(60)
        raise
    finally:
        if consumer is not None:
            consumer.close()
    return records
