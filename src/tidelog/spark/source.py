"""The "tidelog" Python data source: batch and streaming reads (writes are in writer.py).

The driver plans (options, offsets, ranges); executors get everything they need inside the
InputPartition (Spark pickles the reader after ``partitions()``, but stream executors never
see driver state) and open their own log-dir reader or broker connection in ``read()``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tidelog.client.kafka_client import TopicPartition as WireTP
from tidelog.util.topic_partition import TopicPartition

from .arrow import DDL, DDL_WITH_HEADERS, batches_to_arrow, runs_to_arrow
from .avro_values import TypedValueSpec, ValueDecoder, typed_schema, typed_specs
from .backend import Backend, BackendSpec, BrokerBackend, resolve_partitions
from .iceberg_table import IcebergTableReader, spark_schema, wants_table
from .kafka_params import SECURITY_HONOURED
from .options import (
    EARLIEST,
    LATEST,
    OptionError,
    ReadOptions,
    parse_bool,
    parse_read_options,
    parse_subscription,
)
from .planning import (
    OffsetRange,
    Offsets,
    check_ranges,
    from_json_offsets,
    late_bound_ranges,
    rate_limit,
    resolve_end,
    resolve_start,
    split_ranges,
    to_json_offsets,
)
from .remote_backend import RemoteBackend, RemoteSpec

log = logging.getLogger("tidelog.spark")


@dataclass
class TidelogPartition(InputPartition):
    """One [start, end) range of one topic-partition, self-contained for the executor."""

    backend: BackendSpec
    topic: str
    partition: int
    start: int
    end: int
    include_headers: bool
    fail_on_data_loss: bool
    # keyFormat / valueFormat: the typed columns (avro_values.py)
    typed: tuple[TypedValueSpec, ...] = ()


def read_partition(part: TidelogPartition) -> Iterator[pa.RecordBatch]:
    """Read one range; -2 (earliest) and -1 (latest) bounds are resolved here, when the
    partition executes (Spark's KafkaSourceRDD.resolveRange), so re-running an action on the
    same DataFrame sees the topic as it is now."""
    if 0 <= part.end <= part.start:
        return
    backend = part.backend.open()
    try:
        tp = TopicPartition(part.topic, part.partition)
        earliest = backend.earliest([tp])[tp]
        start = earliest if part.start == EARLIEST else part.start
        end = backend.latest([tp])[tp] if part.end == LATEST else part.end
        if end < start:
            raise RuntimeError(
                f"the starting offset {start} of {tp} is after its ending offset {end} "
                "(was the topic deleted and recreated?)"
            )
        if start < earliest:
            if part.fail_on_data_loss:
                raise RuntimeError(
                    f"offsets {start}..{earliest - 1} of {tp} are no longer available (deleted before "
                    "they could be read); set failOnDataLoss=false to skip them"
                )
            start = earliest
        if isinstance(backend, BrokerBackend):  # whole fetch responses, no step per batch
            batches = runs_to_arrow(backend.runs(tp, start, end), topic=part.topic,
                                    partition=part.partition, start=start, end=end,
                                    include_headers=part.include_headers)
        else:
            batches = batches_to_arrow(backend.batches(tp, start, end), topic=part.topic,
                                       partition=part.partition, start=start, end=end,
                                       include_headers=part.include_headers)
        decoders = [ValueDecoder(spec) for spec in part.typed]
        for batch in batches:
            for decoder in decoders:
                batch = decoder.decode(batch)
            yield batch
    finally:
        backend.close()


def _backend_spec(opts: ReadOptions) -> BackendSpec:
    return BackendSpec(
        bootstrap_servers=opts.bootstrap_servers,
        paths=opts.paths,
        client_id=opts.kafka.get("client.id", "tidelog-spark"),
        request_timeout_ms=int(opts.kafka.get("request.timeout.ms", "30000")),
        partition_max_bytes=int(opts.kafka.get("max.partition.fetch.bytes", str(8 << 20))),
        read_committed=opts.read_committed,
        security=tuple(sorted((k, v) for k, v in opts.kafka.items() if k in SECURITY_HONOURED)),
        remote=RemoteSpec(opts.remote, opts.remote_log_metadata) if opts.remote else None,
    )


def _planned(spec: BackendSpec, backend: Backend, tps: list[TopicPartition]) -> BackendSpec:
    """The spec for the executors: on a bucket, with the driver's plan of ``tps`` in it
    (executors read the segments the driver listed, and never list)."""
    if isinstance(backend, RemoteBackend):
        return replace(spec, remote=backend.planned(tps))
    return spec


def _partitions_of(
    opts: ReadOptions, spec: BackendSpec, ranges: list[OffsetRange],
    typed: tuple[TypedValueSpec, ...] = (),
) -> list[TidelogPartition]:
    return [
        TidelogPartition(_own_plan(spec, TopicPartition(r.topic, r.partition)), r.topic, r.partition,
                         r.start, r.end, opts.include_headers, opts.fail_on_data_loss, typed)
        for r in ranges
    ]


def _own_plan(spec: BackendSpec, tp: TopicPartition) -> BackendSpec:
    """On a bucket, each input partition carries the plan of its own topic-partition only."""
    if spec.remote is None or spec.remote.plans is None:
        return spec
    return replace(spec, remote=replace(spec.remote, plans=tuple(p for p in spec.remote.plans if p[0] == tp)))


class TidelogBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, typed: tuple[TypedValueSpec, ...] = ()) -> None:
        self.opts = opts
        self.spec = _backend_spec(opts)
        self.typed = typed

    def plan(self) -> list[OffsetRange]:
        """Resolve offsets and cut ranges (runs on the driver, at planning time)."""
        opts = self.opts
        backend = self.spec.open()
        try:
            tps = resolve_partitions(backend, opts.subscription)
            self.spec = _planned(self.spec, backend, tps)
            if opts.subscription.kind == "subscribe":
                present = {tp.topic for tp in tps}
                missing = [t for t in opts.subscription.topics if t not in present]
                if missing:
                    raise OptionError(f"subscribed topic(s) do not exist: {', '.join(missing)}")
            if opts.min_partitions is None and opts.max_records_per_partition is None:
                return late_bound_ranges(backend, tps, opts)
            # splitting needs sizes: resolve now, as Spark's range calculator does
            start = resolve_start(backend, tps, opts.starting, strategy=opts.starting_by_timestamp_strategy)
            end = resolve_end(backend, tps, opts.ending)
            ranges = check_ranges(start, end, backend.earliest(tps), fail_on_data_loss=opts.fail_on_data_loss)
        finally:
            backend.close()
        return split_ranges(
            ranges,
            min_partitions=opts.min_partitions,
            max_records_per_partition=opts.max_records_per_partition,
        )

    def partitions(self) -> list[InputPartition]:
        ranges = self.plan()  # first: on a bucket, it puts the plan into self.spec
        parts: list[InputPartition] = list(_partitions_of(self.opts, self.spec, ranges, self.typed))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, TidelogPartition):
            return iter(())  # Spark reads one placeholder partition when partitions() is empty
        return read_partition(partition)


class TidelogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"topic": {"partition": next offset}}``; admission control through
    ``maxOffsetsPerTrigger`` (ReadMaxRows, split by lag) and ``minOffsetsPerTrigger`` +
    ``maxTriggerDelay``; availableNow stops at the offsets seen when the query started."""

    def __init__(self, opts: ReadOptions, typed: tuple[TypedValueSpec, ...] = ()) -> None:
        self.opts = opts
        self.spec = _backend_spec(opts)
        self.typed = typed
        self._backend: Backend | None = None
        self._available_now: Offsets | None = None
        self._committed: Offsets = {}
        # Spark starts lastTriggerMillis at 0: the first micro-batch never waits for
        # minOffsetsPerTrigger
        self._last_trigger_ms = -float("inf")

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = self.spec.open()
        return self._backend

    def _current(self) -> list[TopicPartition]:
        return resolve_partitions(self.backend, self.opts.subscription)

    def initialOffset(self) -> dict:
        tps = self._current()
        start = resolve_start(
            self.backend, tps, self.opts.starting, strategy=self.opts.starting_by_timestamp_strategy
        )
        return to_json_offsets(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        """ReadMinRows when minOffsetsPerTrigger is set (maxOffsetsPerTrigger is then applied
        from the options too): Spark hands a one-time trigger (Trigger.Once) ReadAllAvailable
        instead, which reads everything, as Spark's Kafka source does."""
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self.backend.latest(self._current())

    def _with_new_partitions(self, start: Offsets, tps: list[TopicPartition]) -> Offsets:
        gone = sorted(set(start) - set(tps))
        if gone and self.opts.fail_on_data_loss:
            raise RuntimeError(
                f"partitions {', '.join(map(str, gone))} disappeared (topic deleted?); "
                "set failOnDataLoss=false to continue without them"
            )
        new = [tp for tp in tps if tp not in start]
        out = {tp: o for tp, o in start.items() if tp in set(tps)}
        out.update(self.backend.earliest(new))  # new partitions are read from the beginning
        return out

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        self._commit_to_group(from_json_offsets(start))
        start_o = self._with_new_partitions(from_json_offsets(start), self._current())
        latest = self.backend.latest(list(start_o))
        if self._available_now is not None:
            latest = {tp: min(o, self._available_now.get(tp, start_o[tp])) for tp, o in latest.items()}
        self._check_offsets_went_back(start_o, latest)
        if (
            isinstance(limit, ReadMinRows)
            and self._available_now is None  # availableNow never waits
            and self._delay_batch(int(limit.min_rows), start_o, latest)
        ):
            return start
        max_rows = None
        if isinstance(limit, ReadMaxRows):
            max_rows = int(limit.max_rows)
        elif isinstance(limit, ReadMinRows):
            max_rows = self.opts.max_offsets_per_trigger
        end = rate_limit(start_o, latest, max_rows) if max_rows else latest
        return to_json_offsets(end)

    def _check_offsets_went_back(self, start: Offsets, latest: Offsets) -> None:
        """A partition whose end is below where the query stopped was deleted and recreated
        (or truncated): Spark reports data loss ("offset was changed from X to Y"). With
        failOnDataLoss=false the partition is read again from its new earliest offset."""
        for tp, end in latest.items():
            if end < start[tp]:
                message = (
                    f"partition {tp}'s offset was changed from {start[tp]} to {end}, "
                    "some data may have been missed (the topic may have been deleted and recreated)"
                )
                if self.opts.fail_on_data_loss:
                    raise RuntimeError(message + "; set failOnDataLoss=false to continue from its earliest offset")
                log.warning("%s; failOnDataLoss=false: reading it again from its earliest offset", message)

    def _delay_batch(self, minimum: int, start: Offsets, latest: Offsets) -> bool:
        """Spark's delayBatch: skip this trigger while fewer than minOffsetsPerTrigger new
        records are available, unless maxTriggerDelay has passed since the last batch."""
        now = time.monotonic() * 1000
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        available = sum(max(0, latest[tp] - start[tp]) for tp in latest)
        if available < minimum:
            return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> dict:
        return to_json_offsets(self.backend.latest(self._current()))

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        start_o, end_o = from_json_offsets(start), from_json_offsets(end)
        new = [tp for tp in end_o if tp not in start_o]
        start_o.update(self.backend.earliest(new))
        present = set(self._current())
        earliest = self.backend.earliest([tp for tp in end_o if tp in present])
        back = {tp: e for tp, e in end_o.items() if tp in start_o and e < start_o[tp]}
        if back:  # offsets went backwards: latestOffset raised or warned already
            self._check_offsets_went_back(start_o, back)
            start_o.update({tp: earliest.get(tp, 0) for tp in back})
        ranges = check_ranges(
            {tp: start_o[tp] for tp in end_o}, end_o, earliest, fail_on_data_loss=self.opts.fail_on_data_loss
        )
        split = split_ranges(ranges, min_partitions=self.opts.min_partitions,
                             max_records_per_partition=self.opts.max_records_per_partition)
        spec = _planned(self.spec, self.backend, list(end_o))
        return list(_partitions_of(self.opts, spec, split, self.typed))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, TidelogPartition):
            return iter(())  # Spark reads one placeholder partition when partitions() is empty
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        self._commit_to_group(from_json_offsets(end))

    def _commit_to_group(self, offsets: Offsets) -> None:
        """Spark keeps offsets in its checkpoint; with commitOffsetsToGroup the offsets of every
        finished micro-batch also go to the group, where Kafka lag tools see them. Called from
        commit() and from latestOffset(start): Spark asks for the next offsets only after the
        batch ending at ``start`` ran, and it may never call commit() for a query's last batch."""
        group = self.opts.commit_group
        if group is None or not offsets or offsets == self._committed:
            return
        backend = self.backend
        assert isinstance(backend, BrokerBackend)
        backend.client.commit_offsets(group, {WireTP(*tp): o for tp, o in offsets.items()})
        self._committed = dict(offsets)

    def stop(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


def _check_user_schema(
    schema: StructType, include_headers: bool, typed: tuple[TypedValueSpec, ...] = ()
) -> None:
    expected = _expected_schema(include_headers)
    if typed:
        expected = typed_schema(expected, typed)
    if schema is not None and [(f.name, f.dataType) for f in schema.fields] != [
        (f.name, f.dataType) for f in expected.fields
    ]:
        raise OptionError(
            "the tidelog source has a fixed schema (Spark's Kafka schema); do not set .schema(...): "
            f"expected {expected.simpleString()}, got {schema.simpleString()}"
        )


def _expected_schema(include_headers: bool) -> StructType:
    """Built by hand: DDL parsing needs a JVM, which the planner process doesn't have."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


class TidelogDataSource(DataSource):
    """``spark.read.format("tidelog")`` / ``readStream`` / ``write`` / ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "tidelog"

    def _include_headers(self) -> bool:
        return parse_bool("includeHeaders", self.options.get("includeheaders"), False)

    def _typed(self) -> tuple[TypedValueSpec, ...]:
        """keyFormat / valueFormat: the reader schemas, resolved on the driver."""
        options = {str(k).lower(): str(v) for k, v in dict(self.options).items()}
        if "valueformat" not in options and "keyformat" not in options:
            return ()
        opts = parse_read_options(self.options, streaming=False)
        return typed_specs(options, list(opts.subscription.topics), opts.paths)

    def schema(self) -> str | StructType:
        if wants_table(self.options):  # a topic's Iceberg table (iceberg_table.py)
            return spark_schema(self.options)
        parse_subscription(dict(self.options))  # fail at load() on a missing subscription
        typed = self._typed()
        if typed:
            return typed_schema(_expected_schema(self._include_headers()), typed)
        return DDL_WITH_HEADERS if self._include_headers() else DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        if wants_table(self.options):
            return IcebergTableReader(self.options)
        opts = parse_read_options(self.options, streaming=False)
        typed = self._typed()
        _check_user_schema(schema, opts.include_headers, typed)
        return TidelogBatchReader(opts, typed)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_read_options(self.options, streaming=True)
        typed = self._typed()
        _check_user_schema(schema, opts.include_headers, typed)
        return TidelogStreamReader(opts, typed)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .writer import make_writer

        writer = make_writer(self.options, schema, overwrite, streaming=False)
        assert isinstance(writer, DataSourceWriter)
        return writer

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .writer import make_writer

        writer = make_writer(self.options, schema, overwrite, streaming=True)
        assert isinstance(writer, DataSourceStreamWriter)
        return writer


def register(spark: Any) -> None:
    """``tidelog.spark.register(spark)``: make ``format("tidelog")`` available, with Spark's
    Kafka-sink default save mode and Update output mode (see compat.py)."""
    from .compat import install

    install()
    _use_a_worker_python_with_tidelog(spark)
    if not _registered_statically(spark):  # re-registering makes Spark log a WARN each time
        spark.dataSource.register(TidelogDataSource)


def _registered_statically(spark: Any) -> bool:
    """Spark registers ``pyspark_tidelog`` itself when the worker Python can import it."""
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        return bool(manager.dataSourceExists("tidelog"))
    except Exception:  # Spark Connect has no JVM session here: register as documented
        return False


def _use_a_worker_python_with_tidelog(spark: Any) -> None:
    """Spark starts its Python workers with PYSPARK_PYTHON, else ``python3`` from PATH, which
    outside an activated venv is not the interpreter tidelog is installed in. When that worker
    Python cannot import tidelog (and the user chose none), use the driver's own interpreter,
    as a Spark user running from a venv expects; the data source is registered with it."""
    if os.environ.get("PYSPARK_PYTHON"):
        return  # the user's choice
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect: workers run on the server, outside our reach
        return
    current = getattr(sc, "pythonExec", None) or "python3"
    if current == sys.executable or _imports_tidelog(current):
        return
    log.info("worker Python %r cannot import tidelog; using %s (set PYSPARK_PYTHON to choose)",
                current, sys.executable)
    sc.pythonExec = sys.executable


def _imports_tidelog(python: str) -> bool:
    try:
        done = subprocess.run([python, "-c", "import tidelog.spark"], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
