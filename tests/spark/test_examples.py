"""The example pipelines in examples/ run and give the right answers."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kafka_layout import write_partition
from test_broker import _produce, consume_all

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_offline_report(spark: Any, tmp_path: Path) -> None:
    hour = 3_600_000
    write_partition(tmp_path / "a-0", [[(10 * hour + i, b"k", b"vv", []) for i in range(30)]])
    write_partition(tmp_path / "a-1", [[(11 * hour + i, None, b"v", []) for i in range(5)]])
    write_partition(tmp_path / "b-0", [[(11 * hour, b"kk", None, [])]])
    per_partition, busiest = _example("offline_report").report(spark, str(tmp_path), "a")
    got = [(r.topic, r.partition, r["count(1)"], r["min(offset)"], r["max(offset)"], r["sum(bytes)"])
           for r in per_partition]
    assert got == [("a", 0, 30, 0, 29, 90), ("a", 1, 5, 0, 4, 5)]
    assert [r["count"] for r in busiest] == [30, 5]


def test_load_csv_to_topic(spark: Any, bootstrap: str, new_topic: Any, tmp_path: Path) -> None:
    csv = tmp_path / "orders.csv"
    csv.write_text("id,item,qty\n" + "".join(f"{i},item{i % 7},{i}\n" for i in range(200)))
    topic = new_topic(3)
    n = _example("load_csv_to_topic").load(spark, str(csv), bootstrap=bootstrap, topic=topic, key="id")
    assert n == 200
    consumed = consume_all(bootstrap, topic, 3, 200)
    assert sorted(int(k) for _, _, k, _, _, _ in consumed) == list(range(200))
    assert {v for _, _, k, v, _, _ in consumed if k == b"7"} == {b'{"id":7,"item":"item0","qty":7}'}


def test_streaming_aggregation_into_compacted_topic(
    spark: Any, bootstrap: str, new_topic: Any, client: Any, tmp_path: Path
) -> None:
    source = new_topic(2)
    _produce(bootstrap, source, 2, 90)  # keys k1..k89 without k0, k3, ... (every third is null)
    target = f"{source}-counts"
    q = _example("streaming_to_compacted_topic").start(
        spark, bootstrap=bootstrap, source=source, target=target, checkpoint=str(tmp_path / "ckpt"),
        available_now=True, max_offsets_per_trigger=40,
    )
    q.awaitTermination(300)
    assert q.exception() is None
    assert client.partitions_for(target) == [0]
    consumed = consume_all(bootstrap, target, 1, 60)
    latest: dict[bytes | None, bytes] = {}
    for _, _, k, v, _, _ in consumed:
        latest[k] = v
    assert None not in latest and len(latest) == 60  # null keys are filtered out
    assert all(latest[f"k{i}".encode()] == b"1" for i in range(90) if i % 3)


def _read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    import uuid

    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CkTP

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([CkTP(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    idle = 0
    while idle < 6:
        msgs = c.consume(1000, timeout=0.5)
        idle = 0 if msgs else idle + 1
        out += [m.value() for m in msgs if m.error() is None]
    c.close()
    return sorted(out)


def test_exactly_once_pipeline_survives_broker_and_query_restarts(spark: Any, tmp_path: Path) -> None:
    """A separate broker process is SIGKILLed and restarted (same port, same log dir) while the
    query runs, and the query is restarted from its checkpoint: read_committed output equals
    the input, each record once."""
    import sys
    import time

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
    from serve_process import ServeProcess

    from tidelog.client.kafka_client import KafkaClient

    pipeline = _example("exactly_once_pipeline")
    broker = ServeProcess(tmp_path / "logs").start()
    try:
        bootstrap = broker.bootstrap_servers
        with KafkaClient(bootstrap) as c:
            c.create_topics({"orders": 2, "orders-upper": 2})
        _produce(bootstrap, "orders", 2, 60)
        run = {"bootstrap": bootstrap, "source": "orders", "target": "orders-upper",
               "checkpoint": str(tmp_path / "ckpt"), "transactional_id": "eo-orders",
               "max_offsets_per_trigger": 10, "processing_time": "100 milliseconds"}
        q = pipeline.start(spark, **run)
        deadline = time.monotonic() + 120
        while (not q.recentProgress or q.recentProgress[-1]["numInputRows"] == 0) and time.monotonic() < deadline:
            q.awaitTermination(0.2)  # until a micro-batch with rows went through
        broker.kill()  # mid-run
        broker.start(port=int(bootstrap.rsplit(":", 1)[1]))
        _produce(bootstrap, "orders", 2, 30)
        q.stop()  # the query may have failed while the broker was down: restart it either way
        q = pipeline.start(spark, available_now=True, **run)
        q.awaitTermination(300)
        assert q.exception() is None, q.exception()
        expected = sorted(f"value-{i}".encode().upper() * 3 for i in list(range(60)) + list(range(30)))
        assert _read_committed(bootstrap, "orders-upper", 2) == expected
    finally:
        broker.stop()
