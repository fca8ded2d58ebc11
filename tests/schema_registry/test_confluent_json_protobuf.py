"""confluent-kafka's JSON Schema and Protobuf serializers against tidelog's registry:
produce/consume round trips, Protobuf files referencing each other, and Confluent's
compatibility refusals for both types."""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2
from registry_support import ADDRESS_PROTO, CUSTOMER_PROTO, RegistryBroker, call, compile_protos

PERSON = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Person",
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name"],
    "additionalProperties": False,
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def round_trip(registry: RegistryBroker, topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer({"bootstrap.servers": registry.bootstrap_servers})
    for v in values:
        producer.produce(topic, value=v)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": registry.bootstrap_servers,
                         "group.id": unique("g"), "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(200):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) >= len(values):
                break
    finally:
        consumer.close()
    return got


def test_json_schema_serializer_round_trip(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    topic = unique("people")
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = JSONSerializer(json.dumps(PERSON), client)
    sent = [{"name": "ada", "age": 36}, {"name": "alan"}]
    raw = round_trip(registry, topic, [serializer(p, ctx) for p in sent])
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON"
    assert {r[:5] for r in raw} == {b"\x00" + latest.schema_id.to_bytes(4, "big")}
    deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient(
        {"url": registry.url}))
    assert [deserializer(r, ctx) for r in raw] == sent
    # the serializer validates against the registered schema
    with pytest.raises(Exception, match="less than the minimum of 0"):
        serializer({"name": "x", "age": -1}, ctx)


def test_json_schema_compatibility(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    subject = unique("json-compat")
    client.register_schema(subject, Schema(json.dumps(PERSON), "JSON"))
    # a closed content model may not lose a property (old data may carry it)
    fewer = {**PERSON, "properties": {"name": {"type": "string"}}}
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(fewer), "JSON"))
    assert refused.value.http_status_code == 409
    assert "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" in refused.value.error_message
    assert "#/properties/age" in refused.value.error_message
    # ... nor narrow a type; but it may gain an optional property
    narrowed = json.loads(json.dumps(PERSON))
    narrowed["properties"]["age"]["type"] = "string"
    status, body, _ = call(registry.url, "POST",
                           f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
                           {"schema": json.dumps(narrowed), "schemaType": "JSON"})
    assert status == 200 and body["is_compatible"] is False
    assert any("TYPE_CHANGED" in m for m in body["messages"])
    more = json.loads(json.dumps(PERSON))
    more["properties"]["email"] = {"type": "string"}
    client.register_schema(subject, Schema(json.dumps(more), "JSON"))
    assert client.get_versions(subject) == [1, 2]


def test_protobuf_serializer_with_references(registry: RegistryBroker, tmp_path: Path) -> None:
    customer_cls = compile_protos(tmp_path)
    client = SchemaRegistryClient({"url": registry.url})
    topic = unique("customers")
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializer = ProtobufSerializer(customer_cls, client, {"use.deprecated.format": False})
    sent = []
    for i in range(3):
        msg = customer_cls(name=f"c{i}", id=i, tags=["a", "b"], email=f"c{i}@x")
        msg.home.city = "Paris"
        msg.since.seconds = 1_700_000_000 + i
        msg.scores["q"] = i
        sent.append(msg)
    raw = round_trip(registry, topic, [serializer(m, ctx) for m in sent])
    # the imported file was registered under its own subject and referenced by name
    latest = client.get_latest_version(f"{topic}-value")
    refs = [(r.name, r.subject, r.version) for r in latest.schema.references]
    assert refs == [("example/address.proto", "example/address.proto", 1)]
    assert "message Customer {" in latest.schema.schema_str  # stored as .proto text
    deserializer = ProtobufDeserializer(customer_cls, {"use.deprecated.format": False})
    assert [deserializer(r, ctx) for r in raw] == sent
    # the same schema sent as .proto text is the same schema: same id
    ref = SchemaReference("example/address.proto", "example/address.proto", 1)
    text_id = client.register_schema(unique("customer-text"),
                                     Schema(CUSTOMER_PROTO, "PROTOBUF", [ref]))
    assert text_id == latest.schema_id
    status, body, _ = call(registry.url, "GET", f"/schemas/ids/{text_id}?format=serialized")
    assert status == 200
    assert descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(body["schema"])).message_type[0].name == "Customer"


def test_protobuf_compatibility(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    subject = unique("proto-compat")
    client.register_schema(subject, Schema(ADDRESS_PROTO, "PROTOBUF"))
    changed = ADDRESS_PROTO.replace("string zip = 2;", "int64 zip = 2;")
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(changed, "PROTOBUF"))
    assert refused.value.http_status_code == 409
    assert "FIELD_SCALAR_KIND_CHANGED" in refused.value.error_message
    # adding a field and renaming one are compatible
    added = ADDRESS_PROTO.replace("string zip = 2;", "string postcode = 2;\n  string street = 3;")
    client.register_schema(subject, Schema(added, "PROTOBUF"))
    assert client.get_versions(subject) == [1, 2]
    # a schema that does not compile is refused as invalid
    with pytest.raises(SchemaRegistryError) as invalid:
        client.register_schema(unique("proto-bad"), Schema("message {", "PROTOBUF"))
    assert invalid.value.error_code == 42201
