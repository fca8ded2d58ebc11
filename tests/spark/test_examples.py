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
