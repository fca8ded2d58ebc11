"""Path mode with ``kafka.isolation.level=read_committed``: records below the last stable
offset only, aborted transactions and COMMIT/ABORT markers left out — checked on partitions
of an exact shape (Kafka's layout written here, with ``.txnindex`` files and producer
snapshots) and on the log dirs of a real broker fed by a confluent-kafka transactional
producer, against broker mode and a read_committed confluent-kafka consumer."""

from __future__ import annotations

import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTP
from kafka_layout import PartitionWriter
from peers import embedded_tidelog, has_embedded_tidelog

from tidelog.client.kafka_client import KafkaClient
from tidelog.client.kafka_client import TopicPartition as WireTP
from tidelog.records import CompressionType, RecordBatchBuilder
from tidelog.records.batch import ControlRecordType
from tidelog.storage.index.txn_index import AbortedTxn
from tidelog.storage.producer_state import (
    BatchMetadata,
    ProducerStateEntry,
    snapshot_file_name,
    write_snapshot,
)
from tidelog.storage.reader import PartitionReader

TS0 = 1_700_000_000_000
COMMITTED = {"isolation.level": "read_committed"}


def _data(w: PartitionWriter, pid: int | None, *values: str, codec: CompressionType = CompressionType.NONE) -> int:
    b = RecordBatchBuilder(codec, producer_id=-1 if pid is None else pid, producer_epoch=-1 if pid is None else 0,
                           base_sequence=-1 if pid is None else 0, is_transactional=pid is not None)
    for v in values:
        b.append(TS0, None, v.encode())
    return w.append_batch(b.build()).base_offset


def _marker(w: PartitionWriter, pid: int, kind: ControlRecordType) -> int:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, is_transactional=True, is_control=True)
    b.append_control(kind, TS0)
    return w.append_batch(b.build()).base_offset


def _shaped(d: Path, *, txn_index: bool = True) -> PartitionWriter:
    """0-1 plain; pid 1 aborts 2-3 + 6 (its marker at 8, in a later segment than its data);
    pid 2 commits 4-5 (marker 7); pid 1 commits 9 (marker 10); 11 plain; pid 3 opens a
    transaction at 12 and never ends it; 13 plain. Every batch is a segment of its own."""
    w = PartitionWriter(d, segment_bytes=100, index_interval_bytes=0)
    _data(w, None, "p0", "p1")
    _data(w, 1, "a0", "a1", codec=CompressionType.GZIP)
    _data(w, 2, "c0", "c1", codec=CompressionType.ZSTD)
    _data(w, 1, "a2")
    _marker(w, 2, ControlRecordType.COMMIT)
    abort = _marker(w, 1, ControlRecordType.ABORT)
    _data(w, 1, "c2")
    _marker(w, 1, ControlRecordType.COMMIT)
    _data(w, None, "p2")
    _data(w, 3, "o0")
    _data(w, None, "p3")
    w.flush()
    if txn_index:  # the segment holding the ABORT marker lists the transaction
        (d / f"{abort:020d}.txnindex").write_bytes(AbortedTxn(1, 2, abort, 2).encode())
    return w


def _values(reader: PartitionReader, start: int = 0, end: int | None = None) -> list[tuple[int, str]]:
    return [(o, v) for b in reader.read_committed_batches(start, end) if not b.is_control
            for o, v in ((r.offset, r.value.decode()) for r in b.iter_records() if r.value is not None)
            if o >= start and (end is None or o < end)]


SHAPED_COMMITTED = [(0, "p0"), (1, "p1"), (4, "c0"), (5, "c1"), (9, "c2"), (11, "p2")]


@pytest.mark.parametrize("txn_index", [True, False], ids=["txnindex", "marker-not-yet-indexed"])
def test_shaped_partition(tmp_path: Path, txn_index: bool) -> None:
    """Without its .txnindex entry (a live broker appends it after the marker) the ABORT
    marker the scan saw still drops the transaction."""
    r = PartitionReader(_shaped(tmp_path / "t-0", txn_index=txn_index).dir)
    assert len(r.segments()) == 11  # one per batch
    assert r.latest_offset() == 14 and r.last_stable_offset() == 12
    assert _values(r) == SHAPED_COMMITTED
    assert _values(r, 3) == [(4, "c0"), (5, "c1"), (9, "c2"), (11, "p2")]
    # a fetch after the ABORT marker: pid 1's next transaction is not aborted
    assert _values(r, 9) == [(9, "c2"), (11, "p2")]
    assert _values(r, 0, 6) == [(0, "p0"), (1, "p1"), (4, "c0"), (5, "c1")]
    assert _values(r, 12, 14) == []  # at or past the LSO nothing is returned


def test_no_transactions_lso_is_log_end(tmp_path: Path) -> None:
    w = PartitionWriter(tmp_path / "t-0")
    for i in range(5):
        _data(w, None, f"v{i}")
    w.flush()
    r = PartitionReader(w.dir)
    assert r.last_stable_offset() == r.latest_offset() == 5
    assert [b.base_offset for b in r.read_committed_batches(0)] == [0, 1, 2, 3, 4]


def test_producer_snapshot_carries_an_open_transaction(tmp_path: Path) -> None:
    """Kafka's rebuild: the newest readable snapshot, then the batches after it. A snapshot
    being written (bad CRC) is skipped for the older one."""
    w = PartitionWriter(tmp_path / "t-0", segment_bytes=100)
    _data(w, 5, "o0")  # pid 5 opens a transaction at 0 that stays open
    for i in range(4):
        _data(w, None, f"p{i}")
    w.flush()
    entry = ProducerStateEntry(5, 0, deque([BatchMetadata(0, 0, 0, TS0)]), -1, TS0, 0)
    write_snapshot(w.dir / snapshot_file_name(3), [entry])
    (w.dir / snapshot_file_name(4)).write_bytes(b"\x00\x01garbage")
    r = PartitionReader(w.dir)
    assert r.transaction_state().scanned_from == 3
    assert r.last_stable_offset() == 0
    assert _values(r) == []
    # a snapshot without the transaction (it was ended before) lets everything through
    write_snapshot(w.dir / snapshot_file_name(4), [])
    assert r.last_stable_offset() == 5
    assert [v for _o, v in _values(r, 1)] == ["p0", "p1", "p2", "p3"]


def _spark_rows(df: Any) -> list[tuple[int, int, bytes]]:
    return sorted((r.partition, r.offset, r.value) for r in df.select("partition", "offset", "value").collect())


@pytest.mark.spark
def test_spark_path_mode_shaped(spark: Any, tmp_path: Path) -> None:
    _shaped(tmp_path / "t-0")
    df = spark.read.format("tidelog").option("kafka.isolation.level", "read_committed").load(
        str(tmp_path), subscribe="t")
    assert _spark_rows(df) == [(0, o, v.encode()) for o, v in SHAPED_COMMITTED]
    # explicit ends past the LSO stop at it, as a read_committed fetch does
    ranged = spark.read.format("tidelog").load(
        str(tmp_path), subscribe="t", startingOffsets='{"t":{"0":3}}', endingOffsets='{"t":{"0":14}}',
        minPartitions="3", **{"kafka.isolation.level": "read_committed"})
    assert [o for _p, o, _v in _spark_rows(ranged)] == [4, 5, 9, 11]
    uncommitted = spark.read.format("tidelog").load(str(tmp_path), subscribe="t")
    assert uncommitted.count() == 11  # every data record, markers left out


def _confluent_read_committed(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([CkTP(topic, p, 0) for p in range(partitions)])
    out: list[tuple] = []
    deadline = time.monotonic() + 30
    idle = 0
    while time.monotonic() < deadline and (len(out) < expected or idle < 3):
        msgs = c.consume(1000, timeout=0.3)
        idle = 0 if msgs else idle + 1
        out += [(m.partition(), m.offset(), m.value()) for m in msgs if m.error() is None]
    c.close()
    return sorted(out)


@pytest.mark.spark
@pytest.mark.skipif(not has_embedded_tidelog(), reason="needs tidelog.testing.EmbeddedBroker")
def test_broker_log_dir_equals_broker_mode_and_confluent(spark: Any, tmp_path: Path) -> None:
    """Commit, abort and plain writes over 3 partitions, then a transaction left open on
    partition 0 followed by a committed one: partition 0 stops at the open transaction."""
    data = tmp_path / "data"
    with embedded_tidelog(log_dir=data) as bootstrap:
        with KafkaClient(bootstrap) as c:
            c.create_topics({"tx": 3}, configs={"tx": {"segment.bytes": str(4096)}})
        a = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"a-{uuid.uuid4().hex[:8]}",
                      "compression.type": "lz4", "linger.ms": 5})
        a.init_transactions(30)
        visible = 0
        for n, commit in enumerate([True, False, True, False, True] * 3):
            a.begin_transaction()
            for i in range(9):
                a.produce("tx", f"{'c' if commit else 'a'}{n}-{i}".encode() * 20, partition=i % 3)
            a.commit_transaction(30) if commit else a.abort_transaction(30)
            visible += 9 if commit else 0
        plain = Producer({"bootstrap.servers": bootstrap})
        for i in range(6):
            plain.produce("tx", f"plain-{i}".encode(), partition=i % 3)
        assert plain.flush(30) == 0
        visible += 6
        b = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"b-{uuid.uuid4().hex[:8]}"})
        b.init_transactions(30)
        b.begin_transaction()
        b.produce("tx", b"open", partition=0)
        assert b.flush(30) == 0
        a.begin_transaction()
        for p in range(3):
            a.produce("tx", f"late-{p}".encode(), partition=p)
        a.commit_transaction(30)
        visible += 2  # partition 0's is above its LSO

        expected = _confluent_read_committed(bootstrap, "tx", 3, visible)
        assert len(expected) == visible
        assert not [v for _p, _o, v in expected if v.startswith(b"a") or v in (b"open", b"late-0")]
        by_broker = spark.read.format("tidelog").load(
            subscribe="tx", **{"kafka.bootstrap.servers": bootstrap, "kafka.isolation.level": "read_committed"})
        assert _spark_rows(by_broker) == expected
        live = spark.read.format("tidelog").load(str(data), subscribe="tx", **{"kafka.isolation.level": "read_committed"})
        assert _spark_rows(live) == expected  # the broker is running and owns the dir
        with KafkaClient(bootstrap) as c:
            lso = c.list_offsets({WireTP("tx", p): -1 for p in range(3)}, isolation_level=1)
        for tp, (offset, _ts) in lso.items():
            assert PartitionReader(data / f"tx-{tp.partition}").last_stable_offset() == offset
        b.abort_transaction(30)
    assert any(p.stat().st_size for p in (data / "tx-0").glob("*.txnindex"))  # real .txnindex entries
    stopped = spark.read.format("tidelog").load(str(data), subscribe="tx", **{"kafka.isolation.level": "read_committed"})
    # after the abort partition 0's LSO moved past "open" (dropped) and "late-0" (committed)
    got = _spark_rows(stopped)
    assert [v for p, _o, v in got if p == 0][-1] == b"late-0" and b"open" not in [v for *_x, v in got]
    assert len(got) == visible + 1


def test_path_backend_latest_and_timestamps_stop_at_the_lso(tmp_path: Path) -> None:
    from tidelog.spark.backend import BackendSpec
    from tidelog.util.topic_partition import TopicPartition

    w = _shaped(tmp_path / "t-0")
    tp = TopicPartition("t", 0)
    committed = BackendSpec(paths=(str(tmp_path),), read_committed=True).open()
    uncommitted = BackendSpec(paths=(str(tmp_path),)).open()
    assert committed.latest([tp]) == {tp: 12} and uncommitted.latest([tp]) == {tp: 14}
    _marker(w, 3, ControlRecordType.COMMIT)
    w.flush()
    # batches() reuses the scan behind latest() (a task resolving "latest" then reading): it
    # may lag, never overrun; a new listing (topics()) scans again
    assert max(b.last_offset for b in committed.batches(tp, 0, 99)) == 11
    committed.topics()
    assert committed.latest([tp]) == {tp: 15}
    assert max(b.last_offset for b in committed.batches(tp, 0, 99)) == 14
    assert committed.earliest([tp]) == {tp: 0}
    # every record has timestamp TS0: the first is below the LSO
    assert committed.offsets_for_times({tp: TS0}) == {tp: 0}
    # u-0: pid 3 opens a transaction at 0, a plain record at 1 has a later timestamp
    w2 = PartitionWriter(tmp_path / "u-0")
    _data(w2, 3, "o0")
    b = RecordBatchBuilder(producer_id=-1)
    b.append(TS0 + 50, None, b"later")
    w2.append_batch(b.build())
    w2.flush()
    up = TopicPartition("u", 0)
    assert BackendSpec(paths=(str(tmp_path),), read_committed=True).open().offsets_for_times({up: TS0 + 10}) == {up: None}
    assert BackendSpec(paths=(str(tmp_path),)).open().offsets_for_times({up: TS0 + 10}) == {up: 1}


@pytest.mark.spark
def test_stream_waits_at_the_lso_then_reads_the_committed_transaction(spark: Any, tmp_path: Path) -> None:
    logs, ckpt = tmp_path / "logs", tmp_path / "ckpt"
    w = _shaped(logs / "t-0")
    seen: list[str] = []

    def run() -> None:
        def sink(df: Any, _batch_id: int) -> None:
            seen.extend(r.v for r in df.selectExpr("cast(value AS string) v").collect())

        q = (spark.readStream.format("tidelog").option("path", str(logs)).option("subscribe", "t")
             .option("startingOffsets", "earliest").option("kafka.isolation.level", "read_committed").load()
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt))
             .trigger(availableNow=True).start())
        q.awaitTermination(300)
        assert q.exception() is None, q.exception()

    run()
    assert seen == [v for _o, v in SHAPED_COMMITTED]
    _marker(w, 3, ControlRecordType.COMMIT)  # pid 3's open transaction commits
    _data(w, None, "p4")
    w.flush()
    seen.clear()
    run()
    assert seen == ["o0", "p3", "p4"]
