"""KIP-714 subscriptions on a two-broker cluster: altered through one broker, kept in
ZooKeeper (``/config/client-metrics/<name>``) and announced under ``/config/changes``,
applied by the other broker, which answers GetTelemetrySubscriptions with it; a
confluent-kafka producer pushes its metrics to the broker it picked and they show on that
broker's /metrics; deleted through the other broker, gone from both."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from tidelog.client.kafka_client import KafkaClient
from tidelog.server.zk.change_notifications import ZkNodeChangeNotificationListener
from tidelog.server.zk.client import KafkaZkClient
from tidelog.server.zk.client_metrics_configs import ZkClientMetricsConfigStore
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer

HTTP_LINE = re.compile(r"HTTP listener on (http://\S+?)[ ,]")


@pytest.fixture
def cluster(zookeeper_server: ZooKeeperServer) -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(2, {"http.listeners": "http://127.0.0.1:0",
                             "offsets.topic.replication.factor": "1"},
                         zookeeper=zookeeper_server) as c:
        yield c


def _wait(cond: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := cond()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def _address(cluster: EmbeddedCluster, broker_id: int) -> str:
    return f"127.0.0.1:{cluster.brokers[broker_id].port}"


def _http(cluster: EmbeddedCluster, broker_id: int) -> str:
    lines = "".join(cluster.brokers[broker_id].output)
    return str(_wait(lambda: HTTP_LINE.search(lines), "the HTTP listener's line").group(1))


def _call(cluster: EmbeddedCluster, broker_id: int, key: int, version: int,
          body: dict[str, Any]) -> Any:
    with KafkaClient(_address(cluster, broker_id)) as kc:
        return kc.any_connection().call(key, version, body)


def _listed(cluster: EmbeddedCluster, broker_id: int) -> list[str]:
    resp = _call(cluster, broker_id, 74, 1, {"resource_types": [16]})
    return [r.resource_name for r in resp.config_resources]


def _alter(cluster: EmbeddedCluster, broker_id: int, op: int, **configs: str | None) -> int:
    body = {"resources": [{"resource_type": 16, "resource_name": "everyone", "configs": [
        {"name": k.replace("_", "."), "config_operation": op, "value": v}
        for k, v in configs.items()]}], "validate_only": False}
    return int(_call(cluster, broker_id, 44, 1, body).responses[0].error_code)


def _subscription(cluster: EmbeddedCluster, broker_id: int) -> tuple[list[str], float]:
    """What ``broker_id`` tells a new client to push, and every how many seconds (its own
    decision)."""
    resp = _call(cluster, broker_id, 71, 0, {"client_instance_id": uuid.UUID(int=0)})
    assert resp.error_code == 0
    return list(resp.requested_metrics), resp.push_interval.total_seconds()


def _pushed(base: str, client_id: str) -> list[Any]:
    import urllib.request

    with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
        text = r.read().decode()
    return [s for fam in text_string_to_metric_families(text) for s in fam.samples
            if s.name.startswith("org_apache_kafka_producer")
            and s.labels.get("client_id") == client_id]


def test_subscriptions_altered_through_one_broker_apply_on_the_other(
        cluster: EmbeddedCluster) -> None:
    assert _alter(cluster, 1, 0, metrics="org.apache.kafka.producer.", interval_ms="500") == 0
    stored, _ = cluster.zk.zk.get("/config/client-metrics/everyone")
    assert json.loads(stored) == {"version": 1, "config": {
        "metrics": "org.apache.kafka.producer.", "interval.ms": "500"}}
    _wait(lambda: _listed(cluster, 2) == ["everyone"], "broker 2 to apply the subscription")
    # the broker that learned the subscription only from ZooKeeper hands it to clients
    assert _subscription(cluster, 2) == (["org.apache.kafka.producer."], 0.5)

    admin = AdminClient({"bootstrap.servers": _address(cluster, 2)})
    admin.create_topics([NewTopic("on-two", 1, replica_assignment=[[2]])])["on-two"].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": _address(cluster, 2),
                                         "client.id": "cluster-producer"})
    bases = {b: _http(cluster, b) for b in (1, 2)}

    def pushed_somewhere() -> list[int]:
        producer.produce("on-two", b"x")
        producer.poll(0.05)
        return [b for b, base in bases.items() if _pushed(base, "cluster-producer")]

    # librdkafka pushes to one broker it is connected to: broker 2, or broker 1 when that
    # connection came up first or broker 2's went (it then picks one at random), which a
    # loaded machine makes happen; either has the subscription and takes the push
    _wait(pushed_somewhere, "the producer's metrics on a broker's /metrics", 60)
    producer.flush(10)

    assert _alter(cluster, 2, 1, metrics=None, interval_ms=None) == 0
    _wait(lambda: _listed(cluster, 1) == [], "broker 1 to drop the subscription", 60)
    assert _subscription(cluster, 1) == ([], 300)  # nothing to push, the default interval
    assert not cluster.zk.zk.exists("/config/client-metrics/everyone")


def test_a_store_that_could_not_read_zookeeper_reads_it_once_it_can(
        zookeeper_server: ZooKeeperServer) -> None:
    connect = zookeeper_server.connect_string(f"/telemetry-{uuid.uuid4().hex[:10]}")
    writer = KafkaZkClient(connect)
    writer.start()
    zk = KafkaZkClient(connect)  # not connected yet: the first read fails
    try:
        writer.set_or_create_entity_configs("client-metrics", "s", {"metrics": "*"})
        store = ZkClientMetricsConfigStore(zk)
        changes = ZkNodeChangeNotificationListener(zk)
        store.watch(changes, 0)
        assert not store.loaded and store.configs == {}
        zk.start()
        store.ensure_loaded(500)  # not before a second has passed
        assert not store.loaded
        store.ensure_loaded(1000)
        assert store.loaded and store.configs == {"s": {"metrics": "*"}}
        writer.set_or_create_entity_configs("client-metrics", "s", {"metrics": "a."})
        _wait(lambda: store.configs == {"s": {"metrics": "a."}}, "the announced change")
        # a new session: the listener's load has every handler read its entities whole
        writer.set_or_create_entity_configs("client-metrics", "s", {"metrics": "b."}, notify=False)
        assert store.configs == {"s": {"metrics": "a."}}
        changes.load()
        assert store.loaded and store.configs == {"s": {"metrics": "b."}}
    finally:
        zk.close()
        writer.close()
