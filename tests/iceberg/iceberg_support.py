"""Helpers for Iceberg topic tests: a broker with its registry and translation on, Avro
records produced with confluent-kafka's AvroSerializer (each acknowledged record kept), and
the topic's table read back through a catalog of the test's own."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

if TYPE_CHECKING:
    from tidelog.iceberg.service import IcebergService

ORDER = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
Acked = dict[tuple[int, int], dict[str, Any]]  # (partition, offset) -> value


def iceberg_props(**extra: str) -> dict[str, str]:
    return {"schema.registry.listeners": "http://127.0.0.1:0", "iceberg.enabled": "true",
            "iceberg.target.lag.ms": "300", **extra}


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(30)


def order(i: int, rng: random.Random) -> dict[str, Any]:
    return {"id": i, "customer": f"c{rng.randrange(1000)}", "qty": rng.randrange(1, 100),
            "price": round(rng.random() * 100, 2),
            "note": None if i % 3 else f"note {i}"}


Serialized = list[tuple[dict[str, Any], bytes]]


def serialize_orders(registry_url: str, topic: str, ids: range, seed: int = 1) -> Serialized:
    """One Order per id, each with its bytes from confluent-kafka's AvroSerializer."""
    rng = random.Random(seed)
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url}), json.dumps(ORDER))
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [order(i, rng) for i in ids]
    return [(v, serializer(v, ctx)) for v in values]


def produce_serialized(bootstrap: str, topic: str, records: Serialized, **producer: Any
                       ) -> Acked:
    """Produce the records (keyed by id); the acknowledged ones by their coordinates."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **producer})
    acked: Acked = {}

    def on_delivery(err: Any, msg: Any, value: dict[str, Any]) -> None:
        if err is None:
            acked[(msg.partition(), msg.offset())] = value

    for value, data in records:
        while True:
            try:
                p.produce(topic, key=str(value["id"]).encode(), value=data,
                          on_delivery=lambda e, m, v=value: on_delivery(e, m, v))
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    p.flush(120)
    return acked


def produce_avro(bootstrap: str, registry_url: str, topic: str, ids: range,
                 seed: int = 1, **producer: Any) -> Acked:
    """Serialize and produce one Order per id (keys spread them over the partitions)."""
    return produce_serialized(bootstrap, topic,
                              serialize_orders(registry_url, topic, ids, seed), **producer)


def catalog(log_dir: Path | str) -> SqlCatalog:
    home = Path(log_dir).resolve() / ".iceberg"
    return SqlCatalog("tidelog", uri=f"sqlite:///{home}/catalog.db",
                      warehouse=f"file://{home}/warehouse")


def table_offsets(table: Table) -> dict[int, int]:
    snap = table.current_snapshot()
    if snap is None or snap.summary is None:
        return {}
    return {int(p): o for p, o in json.loads(snap.summary["tidelog.offsets"] or "{}").items()}


def wait_for_offsets(log_dir: Path | str, name: str, expected: Mapping[int, int],
                     timeout: float = 90) -> Table:
    """The table once every partition in ``expected`` reached (at least) its offset."""
    deadline = time.monotonic() + timeout
    last: dict[int, int] = {}
    while time.monotonic() < deadline:
        try:
            table = catalog(log_dir).load_table(f"kafka.{name}")
            last = table_offsets(table)
            if all(last.get(p, -1) >= o for p, o in expected.items()):
                return table
        except NoSuchTableError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"table kafka.{name} at {last}, expected {dict(expected)}")


def end_offsets(acked: Acked) -> dict[int, int]:
    out: dict[int, int] = {}
    for p, o in acked:
        out[p] = max(out.get(p, 0), o + 1)
    return out


def check_rows_once(rows: list[dict[str, Any]], acked: Acked) -> None:
    """Every acknowledged record once, with its typed columns and coordinates, and nothing
    else."""
    seen: dict[tuple[int, int], dict[str, Any]] = {}
    for r in rows:
        key = (r["kafka"]["partition"], r["kafka"]["offset"])
        assert key not in seen, f"{key} twice in the table"
        seen[key] = r
    missing = set(acked) - set(seen)
    assert not missing, f"{len(missing)} acknowledged records missing, e.g. {sorted(missing)[:5]}"
    extra = set(seen) - set(acked)
    assert not extra, f"{len(extra)} records not acknowledged, e.g. {sorted(extra)[:5]}"
    for key, value in acked.items():
        row = seen[key]
        got = {k: row[k] for k in value}
        assert got == value, (key, got, value)
        assert row["kafka"]["key"] == str(value["id"]).encode()


def table_files(table: Table) -> set[str]:
    """Every file under the table's location (a local warehouse)."""
    root = Path(table.location().removeprefix("file://"))
    return {str(p) for p in root.rglob("*") if p.is_file()}


def referenced_files(table: Table) -> set[str]:
    """What the table references, by pyiceberg's own inspection (not the broker's code)."""
    out = {table.metadata_location, *(e.metadata_file for e in table.metadata.metadata_log)}
    for s in table.snapshots():
        out.add(s.manifest_list)
        out.update(m.manifest_path for m in s.manifests(table.io))
    out.update(table.inspect.all_files()["file_path"].to_pylist())
    return {p.removeprefix("file://") for p in out}


class AheadClock:
    """The system clock moved ``ahead_ms`` into the future."""

    def __init__(self, ahead_ms: int) -> None:
        self.ahead_ms = ahead_ms

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000 + self.ahead_ms

    def nanoseconds(self) -> int:
        return time.monotonic_ns()

    def sleep(self, ms: int) -> None:
        time.sleep(ms / 1000)


def wait_until(what: Callable[[], bool], message: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if what():
            return
        time.sleep(0.1)
    raise AssertionError(message)


def passes_after(service: IcebergService, topic: str, n: int) -> None:
    """Wait for ``n`` more maintenance passes of ``topic``."""
    start = service.topics[topic].maintained
    wait_until(lambda: service.topics[topic].maintained >= start + n,
               f"{n} maintenance passes of {topic}")


def process_gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie no one reaped yet counts as ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def children(pid: int) -> set[int]:
    """The child processes of ``pid`` (Linux: each of its threads' ``children``)."""
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        out.update(int(c) for c in (task / "children").read_text().split())
    return out
