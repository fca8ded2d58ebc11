"""Three ``tidelog serve`` brokers sharing one catalog: translation at each partition's
leader; SIGKILL of a leader while producing, and the new leaders continue from the table's
offsets (fenced by leader epoch): every acknowledged record once."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer


@pytest.mark.parametrize("process", ["false", "true"], ids=["thread", "process"])
def test_leader_sigkill_translation_continues_from_the_table(
        zookeeper_server: ZooKeeperServer, tmp_path: Path, process: str) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    shared = tmp_path / "shared"
    config = {"iceberg.enabled": "true", "iceberg.target.lag.ms": "300",
              "iceberg.catalog.uri": f"sqlite:///{shared}/catalog.db",
              "iceberg.warehouse": f"file://{shared}/warehouse",
              "iceberg.translation.process": process}
    shared.mkdir()
    with EmbeddedCluster(3, config, zookeeper=zookeeper_server) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("orders", 6, 3, config={
            "tidelog.iceberg.mode": "key_value", "min.insync.replicas": "2"})])[
            "orders"].result(60)
        acked: dict[tuple[int, int], bytes] = {}
        sent = 3000

        def produce() -> None:
            p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                          "enable.idempotence": True, "message.timeout.ms": 120000,
                          "linger.ms": 5})

            def done(err: Any, msg: Any) -> None:
                if err is None:
                    acked[(msg.partition(), msg.offset())] = msg.value()

            for i in range(sent):
                if i == sent // 2:  # the second half goes to the leaders after the kill
                    p.flush(60)
                    half.set()
                    assert killed.wait(120)
                p.produce("orders", key=str(i).encode(), value=b"v%d" % i, on_delivery=done)
                p.poll(0)
                if i % 100 == 0:
                    time.sleep(0.05)
            p.flush(180)

        half, killed = threading.Event(), threading.Event()
        producing = threading.Thread(target=produce)
        producing.start()
        assert half.wait(120), "the first half was not acknowledged"
        time.sleep(rng.uniform(0.0, 1.0))  # translation of the first half under way
        meta = admin.list_topics("orders", timeout=30).topics["orders"].partitions
        victim = meta[0].leader
        cluster.kill(victim)  # SIGKILL the leader of partition 0 (and of others it leads)
        killed.set()
        producing.join(240)
        assert not producing.is_alive()
        assert len(acked) == sent
        ends: dict[int, int] = {}
        for p, o in acked:
            ends[p] = max(ends.get(p, 0), o + 1)
        from pyiceberg.catalog.sql import SqlCatalog

        catalog = SqlCatalog("tidelog", uri=config["iceberg.catalog.uri"],
                             warehouse=config["iceberg.warehouse"])
        deadline = time.monotonic() + 120
        while True:
            t = catalog.load_table("kafka.orders")
            snap = t.current_snapshot()
            have = json.loads(snap.summary["tidelog.offsets"]) if snap and snap.summary else {}
            if all(have.get(str(p), -1) >= e for p, e in ends.items()):
                break
            assert time.monotonic() < deadline, (have, ends)
            time.sleep(0.3)
        rows = t.scan().to_arrow().to_pylist()
        seen: dict[tuple[int, int], bytes] = {}
        for r in rows:
            key = (r["kafka"]["partition"], r["kafka"]["offset"])
            assert key not in seen, f"{key} twice"
            seen[key] = r["value"]
        assert {k: seen.get(k) for k in acked} == acked  # every acknowledged record once
        assert len({v for v in seen.values()}) == len(seen)  # no record twice
        epochs = json.loads(snap.summary["tidelog.leader.epochs"])  # type: ignore[union-attr]
        assert epochs["0"] >= 1  # partition 0's commits came from a later leader too
