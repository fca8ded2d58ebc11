"""Writes to topics (batch and streaming), with Spark's Kafka sink columns and semantics.

Columns: ``value`` (required; string or binary, null = tombstone), ``key`` (optional),
``topic`` (string; required unless the ``topic`` option is set, which then wins),
``partition`` (optional int; null = Kafka's default partitioner), ``headers`` (optional
array<struct<key string, value binary>>); other columns are ignored, as in Spark.
Rows go through librdkafka (confluent-kafka's Producer) configured from the ``kafka.*``
options the way Spark configures the Java producer (kafka_params.producer_config): idempotent
by default, Kafka's murmur2 partitioner, topics auto-created by the broker when it allows it.
Like Spark's Kafka sink the result is **at-least-once**: a task that Spark re-runs after a
failure produces its rows again, and abort() cannot take records back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from .avro_write import TypedWriteSpec, ValueEncoder, write_spec
from .options import OptionError, WriteOptions, parse_write_options

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

_KEY_VALUE_TYPES = (StringType, BinaryType)


@dataclass
class TidelogCommitMessage(WriterCommitMessage):
    records: int
    batches: int


def _check_type(name: str, dtype: DataType, allowed: tuple[type, ...], what: str) -> None:
    if not isinstance(dtype, allowed):
        raise OptionError(f"column {name!r} must be {what}, got {dtype.simpleString()}")


def _check_headers(dtype: DataType) -> None:
    ok = (
        isinstance(dtype, ArrayType)
        and isinstance(dtype.elementType, StructType)
        and [f.name for f in dtype.elementType.fields] == ["key", "value"]
        and isinstance(dtype.elementType.fields[0].dataType, StringType)
        and isinstance(dtype.elementType.fields[1].dataType, (BinaryType, StringType))
    )
    if not ok:
        raise OptionError(
            f"column 'headers' must be array<struct<key: string, value: binary>>, got {dtype.simpleString()}"
        )


def validate_write_schema(schema: StructType, opts: WriteOptions, typed: bool = False) -> list[str]:
    """The columns used, in Spark's Kafka sink rules; errors are raised at planning time.
    ``typed``: the value is a struct encoded by avro_write.py."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError(f"the DataFrame needs a 'value' column (string or binary); it has {sorted(types)}")
    if not typed:
        _check_type("value", types["value"], _KEY_VALUE_TYPES, "string or binary")
    if "key" in types:
        _check_type("key", types["key"], _KEY_VALUE_TYPES, "string or binary")
    if "topic" in types:
        _check_type("topic", types["topic"], (StringType,), "string")
    elif opts.topic is None:
        raise OptionError("no topic: add a 'topic' column or set the 'topic' option")
    if "partition" in types:
        _check_type("partition", types["partition"], (IntegerType,), "int")
    if "headers" in types:
        _check_headers(types["headers"])
    return [c for c in ("key", "value", "topic", "partition", "headers") if c in types]


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    for i, field in enumerate(batch.schema):
        if field.name.lower() == name:
            values: list[Any] = batch.column(i).to_pylist()
            return values
    return None


# One librdkafka producer per configuration per Python worker, reused by every task and
# micro-batch the worker runs (Spark's CachedKafkaProducer); Spark reuses Python workers.
_PRODUCERS: dict[tuple[tuple[str, str], ...], Producer] = {}
_MAX_PRODUCERS = 4
_FAILURES: list[str] = []  # delivery errors reported by librdkafka since the last flush


def _on_delivery_error(err: KafkaError | None, msg: Message) -> None:
    if err is not None:
        _FAILURES.append(f"{msg.topic()}-{msg.partition()}: {err}")


def _producer(opts: WriteOptions) -> Producer:
    from confluent_kafka import Producer

    key = tuple(sorted((k, str(v)) for k, v in opts.producer.items()))
    producer = _PRODUCERS.get(key)
    if producer is None:
        conf: dict[str, Any] = dict(opts.producer)
        conf.setdefault("client.id", "tidelog-spark-writer")
        # only failed deliveries are reported: no Python call per acknowledged record
        conf["delivery.report.only.error"] = True
        conf["on_delivery"] = _on_delivery_error
        if len(_PRODUCERS) >= _MAX_PRODUCERS:  # bound the threads and sockets a worker keeps
            _PRODUCERS.pop(next(iter(_PRODUCERS))).flush(0)
        producer = _PRODUCERS[key] = Producer(conf)
    return producer


def produce_arrow(
    opts: WriteOptions, batches: Iterator[pa.RecordBatch], value: TypedWriteSpec | None = None
) -> TidelogCommitMessage:
    """Produce every row, wait for every acknowledgement; any delivery error fails the task
    (Spark's KafkaWriteTask.checkForErrors), so Spark retries it."""
    if value is not None:  # valueFormat=avro: struct values become Confluent-framed Avro
        encoder = ValueEncoder(value)
        batches = (encoder.encode(b) for b in batches)
    if "transactional.id" in opts.kafka:
        from .txn_sink import produce_transactionally

        return TidelogCommitMessage(
            produce_transactionally(opts, batches, _send_batch, _FAILURES, _on_delivery_error), 0
        )
    producer = _producer(opts)
    _FAILURES.clear()
    records = batches_seen = 0
    for batch in batches:
        records += _send_batch(producer, batch, opts.topic)
        batches_seen += 1
    timeout_s = int(opts.producer.get("delivery.timeout.ms", 120000)) / 1000 + 30
    left = producer.flush(timeout_s)
    if _FAILURES or left:
        errors = list(_FAILURES)
        _FAILURES.clear()
        raise RuntimeError(
            f"writing to Kafka failed: {len(errors)} record(s) not delivered, {left} still queued; "
            f"first errors: {'; '.join(errors[:3])}"
        )
    return TidelogCommitMessage(records, batches_seen)


def _send_batch(producer: Producer, batch: pa.RecordBatch, topic_option: str | None) -> int:
    n: int = batch.num_rows
    values = _column(batch, "value") or [None] * n
    keys = _column(batch, "key") or [None] * n
    topics = [topic_option] * n if topic_option else (_column(batch, "topic") or [None] * n)
    partitions = _column(batch, "partition")
    headers = _column(batch, "headers")
    produce = producer.produce
    for i in range(n):
        topic = topics[i]
        if topic is None:
            raise ValueError("null topic in the data: set the 'topic' option or fill the topic column")
        kw: dict[str, Any] = {}
        if partitions is not None and partitions[i] is not None:
            kw["partition"] = partitions[i]
        if headers is not None and headers[i]:
            kw["headers"] = [(h["key"], h["value"]) for h in headers[i]]
        while True:
            try:
                produce(topic, values[i], keys[i], **kw)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.05)
    producer.poll(0)
    return n


class TidelogBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, value: TypedWriteSpec | None = None) -> None:
        self.opts = opts
        self.value = value

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_arrow(self.opts, iterator, self.value)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: every record was acknowledged by the broker when write() returned."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records already produced stay (at-least-once, like Spark's Kafka sink)."""


class TidelogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions, value: TypedWriteSpec | None = None) -> None:
        self.opts = opts
        self.value = value

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return produce_arrow(self.opts, iterator, self.value)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records were acknowledged in write(); a re-run batch is produced again (at-least-once)."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Produced records cannot be taken back."""


def make_writer(
    options: Mapping[str, Any], schema: StructType, overwrite: bool, *, streaming: bool
) -> DataSourceWriter | TidelogStreamWriter:
    if overwrite and not streaming:
        raise OptionError("save mode 'overwrite' is not supported by a topic (use mode 'append')")
    opts = parse_write_options(options)
    lowered = {str(k).lower(): str(v) for k, v in options.items()}
    values = {f.name.lower(): f.dataType for f in schema.fields}
    value = write_spec(lowered, values["value"], opts.topic) if "value" in values else None
    validate_write_schema(schema, opts, typed=value is not None)
    if streaming and "transactional.id" in opts.kafka and opts.topic is None:
        raise OptionError("kafka.transactional.id in a streaming write needs the 'topic' option "
                          "(its partition 0 carries the exactly-once markers)")
    return TidelogStreamWriter(opts, value) if streaming else TidelogBatchWriter(opts, value)
