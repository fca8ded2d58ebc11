"""KIP-714 with real clients: a CLIENT_METRICS subscription set with IncrementalAlterConfigs
makes a confluent-kafka (librdkafka) producer push its metrics, which /metrics shows per
client instance; clients no subscription matches push nothing; without an HTTP listener the
broker does not advertise the telemetry APIs at all."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from http_support import HTTP, scrape, wait_for

from tidelog.cli.main import main
from tidelog.client.kafka_client import KafkaClient
from tidelog.testing import EmbeddedBroker

TOPIC = "telemetered"
LATENCY = "org_apache_kafka_producer_node_request_latency_avg"
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({**HTTP, "num.partitions": "1"}) as eb:
        yield eb


def _alter(eb: EmbeddedBroker, name: str, **configs: str) -> Any:
    body = {"resources": [{"resource_type": 16, "resource_name": name, "configs": [
        {"name": k.replace("_", "."), "config_operation": 0, "value": v}
        for k, v in configs.items()]}], "validate_only": False}
    with KafkaClient(eb.bootstrap_servers) as kc:
        return kc.any_connection().call(44, 1, body)


def _advertised(eb: EmbeddedBroker) -> set[int]:
    with KafkaClient(eb.bootstrap_servers) as kc:
        resp = kc.any_connection().call(18, 3, {"client_software_name": "t",
                                                "client_software_version": "1"})
    return {int(k.api_key) for k in resp.api_keys}


class Producing:
    """A producer sending a record every 20 ms from its own thread until stopped."""

    def __init__(self, eb: EmbeddedBroker, client_id: str) -> None:
        self.producer = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers,
                                                  "client.id": client_id, "linger.ms": 0})
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        i = 0
        while not self.stop.wait(0.02):
            self.producer.produce(TOPIC, b"v%d" % i)
            self.producer.poll(0)
            i += 1

    def __enter__(self) -> Producing:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        self.producer.flush(10)
        del self.producer  # librdkafka's handle is destroyed: its connections close


def _series(samples: dict[Any, float], name: str, client_id: str) -> dict[Any, float]:
    return {k: v for k, v in samples.items()
            if k[0] == name and ("client_id", client_id) in k[1]}


def test_subscribed_producer_metrics_appear_per_client_instance(
        broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    assert {71, 72} <= _advertised(broker)
    # kafka-configs.sh's form: list values in brackets
    rc = main(["configs", "--bootstrap-server", broker.bootstrap_servers, "--entity-type",
               "client-metrics", "--entity-name", "producers", "--alter", "--add-config",
               "metrics=[org.apache.kafka.producer.],interval.ms=500,match=[client_id=orders-.*]"])
    assert rc == 0 and "Completed updating config for client-metric producers." in (
        capsys.readouterr().out)
    with KafkaClient(broker.bootstrap_servers) as kc:
        listed = kc.any_connection().call(74, 1, {"resource_types": [16]})
        described = kc.any_connection().call(32, 4, {"resources": [{
            "resource_type": 16, "resource_name": "producers", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False})
    assert [r.resource_name for r in listed.config_resources] == ["producers"]
    assert {c.name: c.value for c in described.results[0].configs} == {
        "metrics": "org.apache.kafka.producer.", "interval.ms": "500",
        "match": "client_id=orders-.*"}
    assert main(["configs", "--bootstrap-server", broker.bootstrap_servers, "--entity-type",
                 "client-metrics", "--describe"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Dynamic configs for client-metric producers are:",
        "  interval.ms=500 sensitive=false", "  match=client_id=orders-.* sensitive=false",
        "  metrics=org.apache.kafka.producer. sensitive=false"]
    base = broker.http.urls[0]
    with Producing(broker, "orders-1"), Producing(broker, "audit-1"):
        found = wait_for(lambda: _series(scrape(base), LATENCY, "orders-1"),
                         "the producer's pushed request latency on /metrics")
        # a whole push interval later the other producer, matching no subscription,
        # still has pushed nothing
        samples = scrape(base)
        assert not [k for k in samples if ("client_id", "audit-1") in k[1]]
    (_, labels), value = next(iter(found.items()))
    label = dict(labels)
    assert UUID_RE.match(label["client_instance_id"])
    assert label["client_software_name"] == "confluent-kafka-python"
    assert label["client_software_version"].startswith(confluent_kafka.version()[0])
    assert label["node_id"] == "1"
    assert value >= 0
    assert samples[("kafka_server_client_metrics_instance_count", ())] >= 2
    queue = _series(samples, "org_apache_kafka_producer_record_queue_time_max", "orders-1")
    assert queue, "every subscribed producer metric is there, not only the first"
    # once the producers are gone, so are their instances and series (as Kafka drops a
    # client instance when its connection closes)
    wait_for(lambda: not _series(scrape(base), LATENCY, "orders-1"),
             "the closed producer's series to go")


def test_without_subscription_nothing_is_pushed(broker: EmbeddedBroker) -> None:
    base = broker.http.urls[0]
    with Producing(broker, "orders-2") as p:
        p.producer.flush(10)
        # the client has asked for its subscription (an instance exists) and got none
        wait_for(lambda: scrape(base).get(("kafka_server_client_metrics_instance_count", ()),
                                          0) >= 1, "the producer's GetTelemetrySubscriptions")
    samples = scrape(base)
    assert not [k for k in samples if k[0].startswith("org_apache_kafka")]


def test_no_telemetry_apis_without_a_metrics_listener() -> None:
    with EmbeddedBroker() as eb:
        advertised = _advertised(eb)
    assert 18 in advertised and not {71, 72} & advertised


def test_bad_subscriptions_are_refused_as_kafka_refuses_them(broker: EmbeddedBroker) -> None:
    codes = [int(_alter(broker, "s", **kw).responses[0].error_code) for kw in (
        {"interval_ms": "50"}, {"colour": "blue"}, {"match": "client_rack=eu-1"})]
    assert codes == [42, 42, 40]  # INVALID_REQUEST, INVALID_REQUEST, INVALID_CONFIG
    assert int(_alter(broker, "s", metrics="*").responses[0].error_code) == 0
    with KafkaClient(broker.bootstrap_servers) as kc:
        v0 = kc.any_connection().call(74, 0, {})
        assert [r.resource_name for r in v0.config_resources] == ["s"]
        body = {"resources": [{"resource_type": 16, "resource_name": "s", "configs": [
            {"name": "metrics", "config_operation": 1, "value": None}]}], "validate_only": False}
        assert int(kc.any_connection().call(44, 1, body).responses[0].error_code) == 0
        assert kc.any_connection().call(74, 0, {}).config_resources == ()
