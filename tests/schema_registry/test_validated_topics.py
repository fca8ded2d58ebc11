"""Validated topics: with confluent.value.schema.validation (or .key.) a batch whose records
lack Confluent's framing or carry an id not registered under the strategy's subject is
refused with INVALID_RECORD naming each record; registered ids pass."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from registry_support import RegistryBroker

from tidelog.client.kafka_client import KafkaClient, KafkaClientError, TopicPartition
from tidelog.records import CompressionType, build_batch
from tidelog.schema_registry.validation import SchemaIdValidator

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}]}
ON = {"confluent.value.schema.validation": "true"}


def framed(schema_id: int, payload: bytes = b"\x02") -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + payload


def validator(registry: RegistryBroker) -> SchemaIdValidator:
    assert registry.listener is not None
    return registry.listener.validator


def test_registered_ids_pass_and_others_are_refused(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    good = client.register_schema("orders-value", Schema(json.dumps(ORDER), "AVRO"))
    other = client.register_schema(
        "payments-value", Schema(json.dumps({**ORDER, "name": "Payment"}), "AVRO"))
    check = validator(registry)
    ok = build_batch([(0, None, framed(good)), (1, b"k", framed(good)), (2, b"t", None)],
                     CompressionType.LZ4)
    assert check.validate("orders", ON, ok) is None
    assert check.validate("orders", {}, b"not even a batch") is None  # not validated
    bad = build_batch([(0, None, framed(good)), (1, None, framed(other)),
                       (2, None, b"plain text"), (3, None, framed(999_999))])
    refused = check.validate("orders", ON, bad)
    assert refused is not None
    assert refused.kafka_error == "INVALID_RECORD"
    assert [i for i, _ in refused.errors] == [1, 2, 3]
    assert f"schema id {other} is not registered under subject orders-value" in refused.errors[0][1]
    assert "does not start with the magic byte 0" in refused.errors[1][1]
    assert "schema id 999999 is not registered" in refused.errors[2][1]
    assert refused.error_message.startswith(
        "Log record for topic orders failed schema validation: Record 1:")
    # keys are checked only when asked, against <topic>-key
    keyed = build_batch([(0, framed(good), framed(good))])
    assert check.validate("orders", ON, keyed) is None
    both = {**ON, "confluent.key.schema.validation": "true"}
    assert "subject orders-key" in check.validate("orders", both, keyed).errors[0][1]


def test_record_name_strategies(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    by_record = client.register_schema("shop.Invoice", Schema(json.dumps(
        {**ORDER, "name": "Invoice"}), "AVRO"))
    by_topic_record = client.register_schema("bills-shop.Receipt", Schema(json.dumps(
        {**ORDER, "name": "Receipt"}), "AVRO"))
    check = validator(registry)
    record_name = {**ON, "confluent.value.subject.name.strategy":
                   "io.confluent.kafka.serializers.subject.RecordNameStrategy"}
    topic_record = {**ON, "confluent.value.subject.name.strategy": "TopicRecordNameStrategy"}
    assert check.validate("any", record_name, build_batch([(0, None, framed(by_record))])) is None
    assert check.validate("bills", topic_record,
                          build_batch([(0, None, framed(by_topic_record))])) is None
    assert check.validate("other", topic_record,
                          build_batch([(0, None, framed(by_topic_record))])) is not None
    assert check.validate("any", record_name,
                          build_batch([(0, None, framed(by_topic_record))])) is not None


def test_the_topic_configs_are_accepted_by_the_broker(registry: RegistryBroker) -> None:
    admin = AdminClient({"bootstrap.servers": registry.bootstrap_servers})
    topic = NewTopic("validated", 1, 1, config={
        "confluent.value.schema.validation": "true",
        "confluent.value.subject.name.strategy": "TopicRecordNameStrategy"})
    admin.create_topics([topic])["validated"].result(30)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "validated")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["confluent.value.schema.validation"].value == "true"
    assert configs["confluent.key.schema.validation"].value == "false"
    assert configs["confluent.value.subject.name.strategy"].value == "TopicRecordNameStrategy"


def test_the_broker_refuses_unregistered_ids(registry: RegistryBroker) -> None:
    """Through the produce path: a validated topic refuses a record with an unregistered id
    (INVALID_RECORD, the record named) and accepts a registered one; other topics take any."""
    admin = AdminClient({"bootstrap.servers": registry.bootstrap_servers})
    admin.create_topics([NewTopic("checked", 1, 1, config=ON)])["checked"].result(30)
    client = SchemaRegistryClient({"url": registry.url})
    good = client.register_schema("checked-value", Schema(json.dumps(
        {**ORDER, "name": "Checked"}), "AVRO"))
    results: list[tuple[str, object]] = []

    def report(err: KafkaError | None, msg: object) -> None:
        results.append(("ok", None) if err is None else (err.name(), err.str()))

    producer = Producer({"bootstrap.servers": registry.bootstrap_servers, "retries": 0,
                         "enable.idempotence": False, "linger.ms": 0})
    producer.produce("checked", value=framed(good), on_delivery=report)
    producer.flush(30)
    producer.produce("checked", value=framed(good + 1000), on_delivery=report)
    producer.flush(30)
    producer.produce("checked", value=b"plain", on_delivery=report)
    producer.flush(30)
    producer.produce("unchecked", value=b"plain", on_delivery=report)
    producer.flush(30)
    assert [r[0] for r in results] == ["ok", "INVALID_RECORD", "INVALID_RECORD", "ok"]
    # the answer's error message names the record (librdkafka does not show it; our client does)
    with KafkaClient(registry.bootstrap_servers) as raw:
        batch = build_batch([(0, None, framed(good)), (1, None, framed(good + 1000))])
        with pytest.raises(KafkaClientError) as refused:
            raw.produce(1, {TopicPartition("checked", 0): batch})
        assert refused.value.error.name.upper() == "INVALID_RECORD"
        assert f"Record 1: the value's schema id {good + 1000} is not registered" in str(
            refused.value)
        assert raw.produce(1, {TopicPartition("checked", 0): build_batch(
            [(0, None, framed(good))])}) is not None
