"""Iceberg topics end to end on one broker: confluent-kafka's AvroSerializer producing through
the built-in registry, the table read back by pyiceberg and Polars; aborted transactions;
undecodable records in the DLQ table; the catalog failing and coming back."""

from __future__ import annotations

import json
import os
import signal
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from iceberg_support import (
    ORDER,
    catalog,
    check_rows_once,
    create_topic,
    end_offsets,
    iceberg_props,
    produce_avro,
    table_offsets,
    wait_for_offsets,
)
from pyiceberg.catalog.sql import SqlCatalog

from tidelog.iceberg.service import IcebergService
from tidelog.iceberg.translator import TopicTranslator
from tidelog.testing import EmbeddedBroker


@pytest.fixture(scope="module", params=["thread", "process"])
def broker(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    """A broker translating on its threads, and one with a translation worker process."""
    process = "true" if request.param == "process" else "false"
    with EmbeddedBroker(iceberg_props(**{"iceberg.translation.process": process})) as b:
        yield b


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def test_the_lag_is_read_as_of_now_between_flushes(broker: EmbeddedBroker) -> None:
    """A topic whose flushes are an hour apart: what is produced after its first flush counts
    in its lag at once, before any flush reads the log again."""
    topic = _topic("slow")
    create_topic(broker.bootstrap_servers, topic, 2,
                 **{"tidelog.iceberg.mode": "value_schema_id_prefix",
                    "tidelog.iceberg.target.lag.ms": "3600000"})
    assert broker.iceberg is not None
    deadline = time.monotonic() + 60
    while topic not in broker.iceberg.topics and time.monotonic() < deadline:
        time.sleep(0.05)
    state = broker.iceberg.topics[topic]
    broker.run(broker.iceberg.flush_topic(topic), timeout=60)  # the table read; nothing to add
    flushes = state.translator.flushes
    acked = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic, range(40))
    assert len(acked) == 40
    assert sum(state.translator.lag().values()) == 40
    assert state.translator.flushes == flushes  # no flush ran meanwhile


def test_avro_records_each_once_read_by_pyiceberg_and_polars(
        broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")  # Polars' own planner is a plugin
    topic = _topic("orders")
    create_topic(broker.bootstrap_servers, topic, 6,
                 **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
    acked = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                         range(5000))
    assert len(acked) == 5000 and len({p for p, _ in acked}) == 6
    table = wait_for_offsets(broker.log_dir, topic, end_offsets(acked))
    check_rows_once(table.scan().to_arrow().to_pylist(), acked)
    types = {f.name: str(f.field_type) for f in table.schema().fields}
    assert types["id"] == "long" and types["qty"] == "int" and types["price"] == "double"
    assert str(table.spec().fields[0].transform) == "hour"

    import polars as pl

    frame = pl.scan_iceberg(table).collect()
    assert frame.height == 5000
    coords = set(zip(frame["kafka"].struct.field("partition").to_list(),
                     frame["kafka"].struct.field("offset").to_list(), strict=True))
    assert coords == set(acked)
    assert dict(zip(frame["id"].to_list(), frame["qty"].to_list(), strict=True)) == {
        v["id"]: v["qty"] for v in acked.values()}


def test_an_aborted_transaction_leaves_nothing(broker: EmbeddedBroker) -> None:
    topic = _topic("txn")
    create_topic(broker.bootstrap_servers, topic, 1, **{"tidelog.iceberg.mode": "key_value"})
    p = Producer({"bootstrap.servers": broker.bootstrap_servers,
                  "transactional.id": _topic("tx")})
    p.init_transactions(30)
    kept: list[bytes] = []
    for round_, commit in enumerate([True, False, True, False, True]):
        p.begin_transaction()
        for i in range(50):
            value = b"r%d-%d" % (round_, i)
            p.produce(topic, value=value)
            if commit:
                kept.append(value)
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    # 250 data records and 5 markers: the table covers every offset, holds the committed 150
    table = wait_for_offsets(broker.log_dir, topic, {0: 255})
    rows = table.scan().to_arrow().to_pylist()
    assert sorted(r["value"] for r in rows) == sorted(kept)
    assert len({r["kafka"]["offset"] for r in rows}) == 150


def test_an_unknown_schema_id_goes_to_the_dlq_and_the_partition_goes_on(
        broker: EmbeddedBroker) -> None:
    topic = _topic("mixed")
    create_topic(broker.bootstrap_servers, topic, 1,
                 **{"redpanda.iceberg.mode": "value_schema_id_prefix"})
    good = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic, range(10))
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    bad_value = struct.pack(">bI", 0, 987654) + b"\x02"
    p.produce(topic, key=b"bad", value=bad_value)
    p.produce(topic, key=b"junk", value=b"not framed")
    p.flush(10)
    good |= produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                         range(10, 20))
    table = wait_for_offsets(broker.log_dir, topic, {0: 22})
    check_rows_once(table.scan().to_arrow().to_pylist(), good)
    dlq = catalog(broker.log_dir).load_table(f"kafka.{topic}~dlq")
    rows = sorted(dlq.scan().to_arrow().to_pylist(), key=lambda r: r["kafka"]["offset"])
    assert [(r["kafka"]["offset"], r["kafka"]["key"], r["value"]) for r in rows] == [
        (10, b"bad", bad_value), (11, b"junk", b"not framed")]
    assert "unknown schema id 987654" in rows[0]["reason"]
    assert "wire format" in rows[1]["reason"]


def test_drop_leaves_no_dlq_table(broker: EmbeddedBroker) -> None:
    topic = _topic("dropped")
    create_topic(broker.bootstrap_servers, topic, 1,
                 **{"tidelog.iceberg.mode": "value_schema_id_prefix",
                    "tidelog.iceberg.invalid.record.action": "drop"})
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    p.produce(topic, value=b"junk")
    p.flush(10)
    good = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic, range(3))
    table = wait_for_offsets(broker.log_dir, topic, {0: 4})
    check_rows_once(table.scan().to_arrow().to_pylist(), good)
    assert not catalog(broker.log_dir).table_exists(f"kafka.{topic}~dlq")


@pytest.mark.parametrize("process", ["false", "true"], ids=["thread", "process"])
def test_catalog_unreachable_pauses_translation_not_producers(tmp_path: Path,
                                                              process: str) -> None:
    """The catalog's SQLite file is swapped for a directory (no database can be opened there,
    even by root): flushes fail, acks go on, lag grows; once the file is back translation
    resumes from the table with every record once. A translation worker started during the
    outage lives through it (the calls fail, not the worker)."""
    props = iceberg_props(**{"http.listeners": "http://127.0.0.1:0",
                             "iceberg.translation.process": process})
    with EmbeddedBroker(props, log_dir=tmp_path) as b:
        topic = _topic("paused")
        create_topic(b.bootstrap_servers, topic, 2,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        acked = produce_avro(b.bootstrap_servers, b.schema_registry_url, topic, range(100))
        wait_for_offsets(tmp_path, topic, end_offsets(acked))
        db, aside = _swap_catalog_out(b)
        try:
            assert b.iceberg is not None  # caught up: a flush does not even ask the catalog
            assert b.run(b.iceberg.flush_topic(topic), timeout=60).rows == 0
            more = produce_avro(b.bootstrap_servers, b.schema_registry_url, topic,
                                range(100, 300), seed=2)
            assert len(more) == 200  # producers unaffected
            assert b.iceberg is not None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                state = b.iceberg.topics[topic]
                if state.failing is not None and sum(state.translator.lag().values()) == 200:
                    break
                time.sleep(0.1)
            assert state.failing is not None  # translation paused, and said why
            assert sum(state.translator.lag().values()) == 200
            metrics = _scrape(b.http_url)
            assert metrics[f'tidelog_iceberg_translation_paused{{topic="{topic}"}}'] == 1
            assert sum(v for k, v in metrics.items() if k.startswith(
                "tidelog_iceberg_translation_lag_records") and topic in k) == 200
        finally:
            db.rmdir()
            aside.rename(db)
        acked |= more
        table = wait_for_offsets(tmp_path, topic, end_offsets(acked))
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)
        assert b.iceberg.topics[topic].failing is None
        assert not list((tmp_path / ".iceberg" / "pending").iterdir())
        if b.iceberg.worker is not None:
            assert b.iceberg.worker.starts == 2  # the one killed, and one for the rest


def test_schema_in_summary_and_offsets(broker: EmbeddedBroker) -> None:
    topic = _topic("summary")
    create_topic(broker.bootstrap_servers, topic, 2,
                 **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
    acked = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic, range(40))
    table = wait_for_offsets(broker.log_dir, topic, end_offsets(acked))
    assert table_offsets(table) == end_offsets(acked)
    epochs = json.loads(table.current_snapshot().summary["tidelog.leader.epochs"])  # type: ignore[union-attr]
    assert set(epochs) == {"0", "1"}
    assert {f["name"] for f in ORDER["fields"]} <= {f.name for f in table.schema().fields}  # type: ignore[index]


@pytest.mark.spark
def test_spark_reads_the_table(broker: EmbeddedBroker, spark_session: object) -> None:
    """The test session's SparkSession, with no Iceberg jar: planned from a snapshot in the
    driver, Parquet read in the executors; ``snapshot-id`` and ``as-of-timestamp`` too."""
    spark: Any = spark_session
    topic = _topic("sparked")
    create_topic(broker.bootstrap_servers, topic, 3,
                 **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
    first = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                         range(300))
    table = wait_for_offsets(broker.log_dir, topic, end_offsets(first))
    first_snapshot = table.current_snapshot()
    assert first_snapshot is not None
    more = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                        range(300, 500), seed=3)
    wait_for_offsets(broker.log_dir, topic, end_offsets({**first, **more}))

    def read(**options: str) -> list[Any]:
        reader = spark.read.format("tidelog").option("table", f"kafka.{topic}").option(
            "path", str(broker.log_dir))
        for k, v in options.items():
            reader = reader.option(k, v)
        return list(reader.load().select("kafka.partition", "kafka.offset", "id", "qty",
                                         "note").collect())

    rows = read()
    assert {(r["partition"], r["offset"]) for r in rows} == set(first) | set(more)
    assert len(rows) == 500
    want = {v["id"]: (v["qty"], v["note"]) for v in {**first, **more}.values()}
    assert {r["id"]: (r["qty"], r["note"]) for r in rows} == want
    old = read(**{"snapshot-id": str(first_snapshot.snapshot_id)})
    assert {(r["partition"], r["offset"]) for r in old} == set(first)
    # as-of-timestamp plans the same snapshot's files (planning runs in the driver alone)
    from tidelog.spark.iceberg_table import DataFilePartition, IcebergTableReader

    def planned(**options: str) -> set[str]:
        parts = IcebergTableReader({"table": f"kafka.{topic}", "path": str(broker.log_dir),
                                    **options}).partitions()
        return {path for p in parts if isinstance(p, DataFilePartition) for path in p.paths}

    as_of = planned(**{"as-of-timestamp": str(first_snapshot.timestamp_ms)})
    assert as_of == planned(**{"snapshot-id": str(first_snapshot.snapshot_id)})
    assert as_of < planned()


def _scrape(url: str) -> dict[str, float]:
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line.startswith("tidelog_iceberg")}


def _swap_catalog_out(b: EmbeddedBroker) -> tuple[Path, Path]:
    """Put a directory where the catalog's SQLite file was and close the broker's open
    connections to it (one left open would go on writing the file under its new name: the
    database is in write-ahead-log mode): no database opens there (not even for root), so
    every flush fails until the file is back."""
    db = b.log_dir.resolve() / ".iceberg" / "catalog.db"
    aside = db.with_name("catalog.db.aside")
    db.rename(aside)
    db.mkdir()
    assert b.iceberg is not None
    if b.iceberg.worker is not None:  # its connections end with it: a flush starts another,
        pid = b.iceberg.worker.pid  # which cannot open the catalog either
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        return db, aside
    assert b.iceberg.tables is not None
    catalog = b.iceberg.tables.catalog
    assert isinstance(catalog, SqlCatalog)
    catalog.engine.dispose()
    return db, aside


@pytest.mark.parametrize("process", ["false", "true"], ids=["thread", "process"])
def test_retention_keeps_what_the_table_does_not_have(tmp_path: Path, process: str) -> None:
    props = iceberg_props(**{"log.retention.check.interval.ms": "100",
                             "iceberg.translation.process": process})
    with EmbeddedBroker(props, log_dir=tmp_path) as b:
        topic = _topic("kept")
        create_topic(b.bootstrap_servers, topic, 1, **{
            "tidelog.iceberg.mode": "value_schema_id_prefix", "retention.ms": "1",
            "segment.bytes": "4096"})
        acked = produce_avro(b.bootstrap_servers, b.schema_registry_url, topic, range(50),
                             **{"batch.size": 2048})  # batches below segment.bytes
        wait_for_offsets(tmp_path, topic, end_offsets(acked))
        from tidelog.util.topic_partition import TopicPartition

        lg = b.broker.replica_manager.get_log(TopicPartition(topic, 0))
        deadline = time.monotonic() + 30
        while lg.log_start_offset < 50 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lg.log_start_offset == 50  # all in the table: retention took it all
        db, aside = _swap_catalog_out(b)
        try:
            assert b.iceberg is not None  # caught up: a flush does not even ask the catalog
            assert b.run(b.iceberg.flush_topic(topic), timeout=60).rows == 0
            more = produce_avro(b.bootstrap_servers, b.schema_registry_url, topic,
                                range(50, 250), seed=5, **{"batch.size": 2048})
            assert len(more) == 200, len(more)
            assert lg.number_of_segments() > 1  # several expired segments retention may not take
            time.sleep(1.5)  # ~15 retention checks, each of which would delete them all
            assert lg.log_start_offset == 50
        finally:
            db.rmdir()
            aside.rename(db)
        table = wait_for_offsets(tmp_path, topic, end_offsets(more))
        check_rows_once(table.scan().to_arrow().to_pylist(), {**acked, **more})
        deadline = time.monotonic() + 30
        while lg.log_start_offset < 250 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lg.log_start_offset == 250


def test_deleting_the_topic_drops_its_tables(broker: EmbeddedBroker) -> None:
    from confluent_kafka.admin import AdminClient

    topic = _topic("gone")
    create_topic(broker.bootstrap_servers, topic, 1, **{"tidelog.iceberg.mode": "key_value"})
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    p.produce(topic, value=b"x")
    p.flush(10)
    wait_for_offsets(broker.log_dir, topic, {0: 1})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 30
    while catalog(broker.log_dir).table_exists(f"kafka.{topic}") and (
            time.monotonic() < deadline):
        time.sleep(0.1)
    assert not catalog(broker.log_dir).table_exists(f"kafka.{topic}")


def test_value_schema_latest_decodes_values_without_an_id(broker: EmbeddedBroker) -> None:
    import io

    import fastavro
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    topic = _topic("latest")
    create_topic(broker.bootstrap_servers, topic, 1,
                 **{"tidelog.iceberg.mode": "value_schema_latest"})
    client = SchemaRegistryClient({"url": broker.schema_registry_url})
    client.register_schema(f"{topic}-value", Schema(json.dumps(ORDER), "AVRO"))
    parsed = fastavro.parse_schema(ORDER)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    sent = {}
    for i in range(20):
        value = {"id": i, "customer": "c", "qty": i, "price": 1.5, "note": None}
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, value)  # plain Avro: no magic byte, no id
        p.produce(topic, key=str(i).encode(), value=buf.getvalue())
        sent[(0, i)] = value
    p.flush(10)
    table = wait_for_offsets(broker.log_dir, topic, {0: 20})
    check_rows_once(table.scan().to_arrow().to_pylist(), sent)


def test_a_schema_the_table_cannot_take_goes_to_the_dlq(broker: EmbeddedBroker) -> None:
    """A new version that changes a column's type (the registry allowed it: NONE) cannot
    evolve the table: its records go to the DLQ table, the others still land."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = _topic("clash")
    create_topic(broker.bootstrap_servers, topic, 1,
                 **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
    good = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic, range(5))
    wait_for_offsets(broker.log_dir, topic, {0: 5})
    client = SchemaRegistryClient({"url": broker.schema_registry_url})
    client.set_compatibility(f"{topic}-value", "NONE")
    clash = {**ORDER, "fields": [{"name": "id", "type": "string"}]}
    serializer = AvroSerializer(client, json.dumps(clash))
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    p.produce(topic, key=b"x", value=serializer({"id": "x"}, SerializationContext(
        topic, MessageField.VALUE)))
    p.flush(10)
    good |= produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                         range(5, 10))
    table = wait_for_offsets(broker.log_dir, topic, {0: 11})
    check_rows_once(table.scan().to_arrow().to_pylist(), good)
    dlq = catalog(broker.log_dir).load_table(f"kafka.{topic}~dlq").scan().to_arrow()
    assert dlq.column("kafka").to_pylist()[0]["offset"] == 5
    assert "schema not taken by the table" in dlq.column("reason")[0].as_py()


def _translator_counting_loads(
    b: EmbeddedBroker, prefix: str
) -> tuple[str, IcebergService, TopicTranslator, list[str]]:
    """A topic flushed only when asked; (topic, the Iceberg service, its translator, the names
    of the tables the translator loads from the catalog from now on)."""
    topic = _topic(prefix)
    create_topic(b.bootstrap_servers, topic, 1, **{
        "tidelog.iceberg.mode": "value_schema_id_prefix",
        "tidelog.iceberg.target.lag.ms": "3600000"})  # flushed here only
    assert b.iceberg is not None
    service = b.iceberg
    deadline = time.monotonic() + 30
    while topic not in service.topics and time.monotonic() < deadline:
        time.sleep(0.05)
    ours = service.topics[topic].translator
    loads: list[str] = []
    assert service.tables is not None
    load = service.tables.load
    service.tables.load = lambda name: loads.append(name) or load(name)  # type: ignore[method-assign]
    return topic, service, ours, loads


def test_a_commit_from_the_table_of_its_own_last_commit_is_fenced_by_another(
        tmp_path: Path) -> None:
    """A flush starts from the table its translator's last commit left (the catalog is not
    asked); when another translator (a deposed leader) committed in between, the catalog
    refuses the commit by its snapshot requirement, the refused commit's files are deleted,
    and the next flush reads the table from the catalog: every record once."""
    from tidelog.iceberg.table_writer import LocalTables
    from tidelog.iceberg.tables import Tables

    with EmbeddedBroker(iceberg_props(), log_dir=tmp_path) as b:
        topic, service, ours, loads = _translator_counting_loads(b, "fenced")
        acked = produce_avro(b.bootstrap_servers, b.schema_registry_url, topic, range(10))
        assert b.run(service.flush_topic(topic), timeout=60).rows == 10
        other = TopicTranslator(ours.settings, ours.source, LocalTables(Tables(
            catalog(tmp_path), "kafka", tmp_path / "other-pending"), service.codecs))
        acked |= produce_avro(b.bootstrap_servers, b.schema_registry_url, topic, range(10, 15),
                              seed=2)
        assert other.flush().rows == 5  # the other one commits [10, 15)
        acked |= produce_avro(b.bootstrap_servers, b.schema_registry_url, topic, range(15, 20),
                              seed=3)
        loads.clear()
        refused = b.run(service.flush_topic(topic), timeout=60)
        assert refused.rows == 0 and not refused.committed  # [10, 20) refused by the catalog
        assert topic not in loads  # it started from its own last commit's table
        warehouse = tmp_path / ".iceberg" / "warehouse"
        names = {f.name for f in warehouse.rglob("*.parquet")}
        table = catalog(tmp_path).load_table(f"kafka.{topic}")
        referenced = {Path(t.file.file_path).name for t in table.scan().plan_files()}
        assert names == referenced  # the refused commit's data file is gone
        assert not list((tmp_path / ".iceberg" / "pending").iterdir())
        done = b.run(service.flush_topic(topic), timeout=60)
        assert done.rows == 5 and done.committed == {0: 20} and topic in loads
        table = catalog(tmp_path).load_table(f"kafka.{topic}")
        assert table_offsets(table) == {0: 20}
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)


def test_the_dlq_table_is_reused_from_its_last_commit_and_fenced_by_another(
        tmp_path: Path) -> None:
    """The DLQ table too is read from the catalog once, then started from as this
    translator's last commit left it; a commit of another translator in between gets the
    next DLQ commit refused, and the flush after reads both tables again: every record once,
    in the table or the DLQ table."""
    from tidelog.iceberg.table_writer import LocalTables
    from tidelog.iceberg.tables import Tables

    with EmbeddedBroker(iceberg_props(), log_dir=tmp_path) as b:
        topic, service, ours, loads = _translator_counting_loads(b, "dlqreuse")
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        acked: dict[tuple[int, int], dict[str, Any]] = {}
        junk: list[bytes] = []

        def round_of(i: int, translator: TopicTranslator) -> int:
            acked.update(produce_avro(b.bootstrap_servers, b.schema_registry_url, topic,
                                      range(i * 10, i * 10 + 5), seed=i))
            junk.append(f"junk {i}".encode())
            p.produce(topic, value=junk[-1])
            p.flush(10)
            if translator is ours:
                return b.run(service.flush_topic(topic), timeout=60).dlq_rows
            return translator.flush().dlq_rows

        assert round_of(0, ours) == 1
        loads.clear()
        assert round_of(1, ours) == 1 and round_of(2, ours) == 1
        assert loads == []  # neither table read from the catalog again
        other = TopicTranslator(ours.settings, ours.source, LocalTables(Tables(
            catalog(tmp_path), "kafka", tmp_path / "other-pending"), service.codecs))
        assert round_of(3, other) == 1  # a deposed leader commits [18, 24) to both
        refused = round_of(4, ours)
        assert refused == 0  # its DLQ commit was refused by the catalog
        done = b.run(service.flush_topic(topic), timeout=60)
        assert done.dlq_rows == 1 and done.rows == 5
        assert f"{topic}~dlq" in loads and topic in loads
        table = catalog(tmp_path).load_table(f"kafka.{topic}")
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)
        dlq = catalog(tmp_path).load_table(f"kafka.{topic}~dlq").scan().to_arrow()
        assert sorted(dlq.column("value").to_pylist()) == sorted(junk)  # each once
        warehouse = tmp_path / ".iceberg" / "warehouse"
        on_disk = {f.name for f in warehouse.rglob("*.parquet")}
        referenced = {Path(t.file.file_path).name for name in (topic, f"{topic}~dlq")
                      for t in catalog(tmp_path).load_table(f"kafka.{name}").scan()
                      .plan_files()}
        assert on_disk == referenced  # the refused commit's files are gone
