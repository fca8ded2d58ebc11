"""kill -9 of a ``tidelog serve`` process during translation, twice, with a producer running
all along: after the restarts every acknowledged record is in the table once, nothing else is,
and no file of an interrupted commit is left behind (the orphan-file age is a second here, so
that maintenance passes run all along, commits in flight included). With a translation worker
process, the worker ends with the broker it belonged to (no process left behind)."""

from __future__ import annotations

import os
import random
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from iceberg_support import (
    Acked,
    catalog,
    children,
    create_topic,
    end_offsets,
    iceberg_props,
    process_gone,
    produce_serialized,
    referenced_files,
    serialize_orders,
    table_files,
    wait_for_offsets,
    wait_until,
)

from tidelog.testing.cluster import BrokerProcess


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _check(rows: list[dict[str, Any]], acked: Acked, sent: dict[int, dict[str, Any]]) -> None:
    seen: set[tuple[int, int]] = set()
    ids: set[int] = set()
    for r in rows:
        key = (r["kafka"]["partition"], r["kafka"]["offset"])
        assert key not in seen, f"{key} twice in the table"
        seen.add(key)
        assert r["id"] not in ids, f"id {r['id']} twice in the table"
        ids.add(r["id"])
        assert {k: r[k] for k in sent[r["id"]]} == sent[r["id"]]  # a record that was sent
    missing = set(acked) - seen
    assert not missing, f"{len(missing)} acknowledged records missing: {sorted(missing)[:5]}"



def _spawned(pid: int) -> set[int]:
    """The translation worker of broker ``pid`` (a spawned interpreter), once it runs."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = {c for c in children(pid)
                 if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()}
        if found:
            assert len(found) == 1
            return found
        time.sleep(0.05)
    raise AssertionError(f"broker {pid} started no translation worker")


def _kill(broker: BrokerProcess, process: bool) -> None:
    """SIGKILL the broker's process alone (not its process group); its translation worker
    (if it runs one: a spawned interpreter, beside multiprocessing's resource tracker) ends
    with it, and no process of it is left."""
    assert broker.proc is not None
    if process:
        _spawned(broker.proc.pid)  # started (the broker says it is ready before)
    workers = children(broker.proc.pid)
    os.kill(broker.proc.pid, signal.SIGKILL)
    broker.kill()  # reaped
    deadline = time.monotonic() + 30
    while not all(process_gone(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(process_gone(w) for w in workers), f"worker {workers} outlived its broker"


def _run(tmp_path: Path, records: int, kills: int, seed: int, process: bool = False) -> Acked:
    rng = random.Random(seed)
    print(f"seed {seed}")
    port, registry_port = _free_port(), _free_port()
    props = iceberg_props(**{
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "schema.registry.listeners": f"http://127.0.0.1:{registry_port}",
        "iceberg.target.lag.ms": "100", "log.dirs": str(tmp_path / "logs"),
        "iceberg.maintenance.interval.ms": "300", "iceberg.orphan.files.older.than.ms": "1000",
        "offsets.topic.replication.factor": "1",
        "iceberg.translation.process": str(process).lower()})
    broker = BrokerProcess(0, tmp_path / "logs", props).start()
    bootstrap, registry = f"127.0.0.1:{port}", f"http://127.0.0.1:{registry_port}"
    try:  # the broker is ready once its Kafka listener is; its Schema Registry comes after
        wait_until(lambda: any("Schema Registry on" in line for line in broker.output),
                   "the Schema Registry listening", timeout=120)
        topic = "orders"
        create_topic(bootstrap, topic, 6, **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        acked: Acked = {}
        serialized = serialize_orders(registry, topic, range(records), seed)
        sent = {value["id"]: value for value, _ in serialized}

        def produce() -> None:
            acked.update(produce_serialized(bootstrap, topic, serialized,
                                            **{"enable.idempotence": True,
                                               "message.timeout.ms": 120000}))

        producing = threading.Thread(target=produce)
        producing.start()
        deadline = time.monotonic() + 120  # the catalog opened (the listener was up before)
        while not (tmp_path / "logs" / ".iceberg" / "catalog.db").exists():
            assert time.monotonic() < deadline, "no catalog"
            time.sleep(0.05)
        for _ in range(kills):
            time.sleep(rng.uniform(1.0, 3.0))
            _kill(broker, process)  # SIGKILL: mid-flush or mid-commit, wherever it is
            broker.start()
        producing.join(180)
        assert not producing.is_alive()
        assert len(acked) == records  # the idempotent producer got every record in
        table = wait_for_offsets(tmp_path / "logs", topic, end_offsets(acked), timeout=120)
        _check(table.scan().to_arrow().to_pylist(), acked, sent)
        referenced = {t.file.file_path.removeprefix("file://")
                      for t in table.scan().plan_files()}
        on_disk = {str(p) for p in (Path(table.location().removeprefix("file://")) / "data")
                   .rglob("*.parquet")}
        assert on_disk == referenced  # no data file of an interrupted commit left
        assert not os.listdir(tmp_path / "logs" / ".iceberg" / "pending")
        deadline = time.monotonic() + 60  # a metadata file of a commit cut short: an orphan
        while table_files(table) != referenced_files(table) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert table_files(table) == referenced_files(table)
        assert not catalog(tmp_path / "logs").table_exists(f"kafka.{topic}~dlq")
    finally:
        broker.stop()
    return acked


@pytest.mark.parametrize("process", [False, True], ids=["thread", "process"])
def test_kill_9_twice_during_translation(tmp_path: Path, process: bool) -> None:
    _run(tmp_path, records=5000, kills=2, seed=random.randrange(1 << 30), process=process)


@pytest.mark.slow
@pytest.mark.parametrize("process", [False, True], ids=["thread", "process"])
def test_kill_9_twice_100k_records(tmp_path: Path, process: bool, spark_session: object,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case: 100,000 Avro records over 6 partitions, kill -9 twice during
    translation; pyiceberg (in ``_run``), Polars and Spark read the same rows."""
    acked = _run(tmp_path, records=100_000, kills=2, seed=random.randrange(1 << 30),
                 process=process)
    want = {key: (value["id"], value["qty"]) for key, value in acked.items()}
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")  # Polars' own: a plugin
    import polars as pl

    frame = pl.scan_iceberg(catalog(tmp_path / "logs").load_table("kafka.orders")).collect()
    kafka = frame["kafka"].struct
    assert dict(zip(zip(kafka.field("partition").to_list(), kafka.field("offset").to_list(),
                        strict=True), zip(frame["id"].to_list(), frame["qty"].to_list(),
                                          strict=True), strict=True)) == want
    assert frame.height == len(want)  # each once
    spark: Any = spark_session
    rows = spark.read.format("tidelog").option("table", "kafka.orders").option(
        "path", str(tmp_path / "logs")).load().select(
        "kafka.partition", "kafka.offset", "id", "qty").collect()
    assert len(rows) == len(want)
    assert {(r["partition"], r["offset"]): (r["id"], r["qty"]) for r in rows} == want
