"""The translation worker process (``iceberg.translation.process``): a real SIGKILL of the
worker in the middle of a commit (its commit marker still down) gets it started again, with
every acknowledged record in the table once and no file of the interrupted commit left; the
worker's whole process is niced, the broker's event loop and threads are not; the schemas a
flush decodes with (and the ones they reference) come from the broker's registry."""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import fastavro
from confluent_kafka import Producer
from iceberg_support import (
    Acked,
    catalog,
    check_rows_once,
    create_topic,
    end_offsets,
    iceberg_props,
    process_gone,
    produce_serialized,
    serialize_orders,
    wait_for_offsets,
    wait_until,
)
from test_iceberg_priority import nice_of

from tidelog.iceberg.priority import MAX_NICE
from tidelog.testing import EmbeddedBroker


def process_nice(pid: int) -> list[int]:
    """The nice value of every thread of process ``pid``."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        stat = (task / "stat").read_text()
        out.append(int(stat[stat.rindex(")") + 2:].split()[16]))
    return out


def _scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return {k: float(v) for k, v in (line.rsplit(" ", 1) for line in text.splitlines()
                                     if line and not line.startswith("#"))}


def test_worker_killed_mid_commit_is_restarted_and_every_record_is_in_the_table_once(
        tmp_path: Path) -> None:
    props = iceberg_props(**{"iceberg.translation.process": "true",
                             "iceberg.target.lag.ms": "100",
                             "http.listeners": "http://127.0.0.1:0"})
    pending = tmp_path / ".iceberg" / "pending"
    with EmbeddedBroker(props, log_dir=tmp_path) as b:
        assert b.iceberg is not None and b.iceberg.worker is not None
        worker = b.iceberg.worker
        assert b.iceberg.tables is None  # no catalog in the broker's process
        topic = "killed"
        create_topic(b.bootstrap_servers, topic, 3,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        serialized = serialize_orders(b.schema_registry_url, topic, range(2000))
        acked: Acked = {}
        stop = threading.Event()

        def produce() -> None:  # rounds until a kill landed mid-commit: commits all along
            while not stop.is_set():
                for i in range(0, len(serialized), 500):
                    acked.update(produce_serialized(b.bootstrap_servers, topic,
                                                    serialized[i:i + 500]))

        producing = threading.Thread(target=produce)
        producing.start()
        interrupted, killed = 0, []
        deadline = time.monotonic() + 120
        while not interrupted and time.monotonic() < deadline:
            pid = worker.pid
            if pid is None or not any(pending.glob("*.json")):
                time.sleep(0.001)
                continue
            os.kill(pid, signal.SIGKILL)  # a commit of it is in flight: its marker is down
            killed.append(pid)
            wait_until(lambda p=pid: process_gone(p), f"worker {pid} ended", timeout=30)
            interrupted += any(pending.glob("*.json"))  # the commit did not end: cut short
        stop.set()
        producing.join(180)
        assert not producing.is_alive()
        assert interrupted, "no SIGKILL landed in the middle of a commit"
        assert len(acked) >= 2000
        table = wait_for_offsets(tmp_path, topic, end_offsets(acked), timeout=120)
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)
        assert worker.deaths == len(killed)  # the broker saw each death ...
        assert worker.starts == len(killed) + 1  # ... and started a new worker each time
        assert worker.pid not in killed and worker.pid is not None and not process_gone(worker.pid)
        metrics = _scrape(b.http_url)
        assert metrics["tidelog_iceberg_translation_worker_starts_total"] == len(killed) + 1
        assert metrics["tidelog_iceberg_translation_worker_pid"] == worker.pid
        assert b.iceberg.topics[topic].failing is None  # resumed
        referenced = {t.file.file_path.removeprefix("file://")
                      for t in table.scan().plan_files()}
        on_disk = {str(p) for p in (Path(table.location().removeprefix("file://")) / "data")
                   .rglob("*.parquet")}
        assert on_disk == referenced  # no data file of the interrupted commit left
        assert not list(pending.iterdir())


def test_the_worker_process_is_niced_and_the_broker_is_not(tmp_path: Path) -> None:
    props = iceberg_props(**{"iceberg.translation.process": "true"})
    with EmbeddedBroker(props, log_dir=tmp_path) as b:
        topic = "niced"
        create_topic(b.bootstrap_servers, topic, 2,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        acked = produce_serialized(b.bootstrap_servers, topic,
                                   serialize_orders(b.schema_registry_url, topic, range(50)))
        wait_for_offsets(tmp_path, topic, end_offsets(acked))  # its threads started
        assert b.iceberg is not None and b.iceberg.worker is not None
        pid = b.iceberg.worker.pid
        assert pid is not None and pid != os.getpid()
        base = os.getpriority(os.PRIO_PROCESS, 0)
        niced = process_nice(pid)
        assert len(niced) > 1  # the serving threads at least, and pyarrow's
        assert set(niced) == {min(MAX_NICE, base + 10)}  # every thread of it
        loop = b._thread
        assert loop is not None and loop.native_id is not None
        assert nice_of(loop.native_id) == base
        for t in b.iceberg.threads():  # the broker's translation threads only wait for it
            assert t.native_id is not None and nice_of(t.native_id) == base, t.name
    wait_until(lambda: process_gone(pid), "the worker ended with the broker's stop", timeout=30)


def _register(registry: str, subject: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(
        f"{registry}/subjects/{subject}/versions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as r:
        return int(json.loads(r.read())["id"])


def test_the_worker_decodes_with_a_schema_that_references_another(tmp_path: Path) -> None:
    """The worker asks the broker's registry for the schema of an id and for the versions
    its references name (Confluent's schema references): typed columns from both."""
    customer = {"type": "record", "name": "Customer", "namespace": "shop",
                "fields": [{"name": "name", "type": "string"}]}
    order = {"type": "record", "name": "Order", "namespace": "shop",
             "fields": [{"name": "id", "type": "long"},
                        {"name": "customer", "type": "shop.Customer"}]}
    props = iceberg_props(**{"iceberg.translation.process": "true"})
    with EmbeddedBroker(props, log_dir=tmp_path) as b:
        topic = "referencing"
        _register(b.schema_registry_url, "customer", {"schema": json.dumps(customer)})
        schema_id = _register(b.schema_registry_url, f"{topic}-value", {
            "schema": json.dumps(order),
            "references": [{"name": "shop.Customer", "subject": "customer", "version": 1}]})
        create_topic(b.bootstrap_servers, topic, 1,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        named: dict[str, Any] = {}
        fastavro.parse_schema(customer, named_schemas=named)
        parsed = fastavro.parse_schema(order, named_schemas=named)
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(5):
            out = io.BytesIO()
            fastavro.schemaless_writer(out, parsed, {"id": i, "customer": {"name": f"c{i}"}})
            p.produce(topic, value=struct.pack(">bI", 0, schema_id) + out.getvalue())
        assert p.flush(30) == 0
        table = wait_for_offsets(tmp_path, topic, {0: 5})
        rows = table.scan().to_arrow().to_pylist()
        assert sorted((r["id"], r["customer"]["name"]) for r in rows) == [
            (i, f"c{i}") for i in range(5)]
        assert not catalog(tmp_path).table_exists(f"kafka.{topic}~dlq")
