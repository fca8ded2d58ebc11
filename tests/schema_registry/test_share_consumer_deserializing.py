"""confluent-kafka's ``DeserializingShareConsumer`` (a KIP-932 share consumer) reading
Confluent-framed Avro, JSON Schema and Protobuf values against the broker's registry; a
poison record (a schema id the registry does not know) is an error on that record only."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    AcknowledgeType,
    DeserializingShareConsumer,
    KafkaError,
    Message,
    Producer,
)
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from confluent_kafka.admin import ResourceType as AdminResource
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from registry_support import RegistryBroker, compile_protos

from tidelog.util.topic_partition import TopicPartition

USER = {"type": "record", "name": "User", "namespace": "com.example",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
PERSON = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person",
          "type": "object", "properties": {"name": {"type": "string"},
                                           "age": {"type": "integer"}},
          "required": ["name"]}
POISON = b"\x00" + (987_654).to_bytes(4, "big") + b"\x02\x04not-registered"

Codec = tuple[Callable[[Any, SerializationContext], bytes | None], Any, list[Any]]


@pytest.fixture(scope="module")
def share_registry() -> Iterator[RegistryBroker]:
    with RegistryBroker({"group.share.heartbeat.interval.ms": 200,
                         "offsets.topic.num.partitions": 1}) as rb:
        yield rb


def codec(kind: str, client: SchemaRegistryClient, tmp: Path) -> Codec:
    if kind == "avro":
        users = [{"name": f"u{i}", "age": 20 + i} for i in range(3)]
        return AvroSerializer(client, json.dumps(USER)), AvroDeserializer(client), users
    if kind == "json":
        people = [{"name": f"p{i}", "age": i} for i in range(3)]
        return (JSONSerializer(json.dumps(PERSON), client),
                JSONDeserializer(json.dumps(PERSON), schema_registry_client=client), people)
    customer = compile_protos(tmp)
    sent = [customer(name=f"c{i}", id=i) for i in range(3)]
    conf = {"use.deprecated.format": False}
    return (ProtobufSerializer(customer, client, conf), ProtobufDeserializer(customer, conf),
            sent)


@pytest.mark.parametrize("kind", ["avro", "json", "protobuf"])
def test_a_share_consumer_deserializes_and_surfaces_a_poison_record(
        share_registry: RegistryBroker, tmp_path: Path, kind: str) -> None:
    rb = share_registry
    client = SchemaRegistryClient({"url": rb.url})
    topic, group = f"framed-{kind}-{uuid.uuid4().hex[:6]}", f"sg-{kind}"
    serializer, deserializer, sent = codec(kind, client, tmp_path)
    admin = AdminClient({"bootstrap.servers": rb.bootstrap_servers})
    earliest = ConfigResource(AdminResource.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([earliest]).values():
        f.result(10)
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = [serializer(sent[0], ctx), serializer(sent[1], ctx), POISON,
              serializer(sent[2], ctx)]
    p = Producer({"bootstrap.servers": rb.bootstrap_servers})
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(30) == 0
    c = DeserializingShareConsumer({"bootstrap.servers": rb.bootstrap_servers,
                                    "group.id": group, "value.deserializer": deserializer,
                                    "share.acknowledgement.mode": "explicit"})
    got: dict[int, Message] = {}
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < 4 and time.monotonic() < deadline:
            for m in c.poll(0.2):
                got[m.offset()] = m
                bad = m.error() is not None
                c.acknowledge(m, AcknowledgeType.REJECT if bad else AcknowledgeType.ACCEPT)
        c.commit_sync(10)
        assert sorted(got) == [0, 1, 2, 3]
        assert [got[o].value() for o in (0, 1, 3)] == sent  # decoded through the registry
        assert all(got[o].error() is None for o in (0, 1, 3))
        poison = got[2].error()
        assert poison is not None and poison.code() == KafkaError._VALUE_DESERIALIZATION
        assert got[2].value() == POISON  # its raw bytes, for the application to see
        share = rb.embedded.broker.group_coordinator.share
        sp = share.partitions[(group, TopicPartition(topic, 0))]
        deadline = time.monotonic() + 10
        while sp.start_offset < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sp.start_offset == 4  # three accepted, the poison rejected: none comes back
    finally:
        c.close()
