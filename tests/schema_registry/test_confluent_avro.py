"""confluent-kafka's SchemaRegistryClient and its Avro serializer and deserializer against
tidelog's registry, records produced and consumed through tidelog."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from registry_support import RegistryBroker

USER_V1 = {
    "type": "record",
    "name": "User",
    "namespace": "com.example",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}],
}


def avro(schema: dict[str, object]) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


def with_fields(*extra: dict[str, object]) -> dict[str, object]:
    return {**USER_V1, "fields": [*USER_V1["fields"], *extra]}  # type: ignore[list-item]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def consume_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(200):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if len(values) >= count:
                break
    finally:
        consumer.close()
    return values


def test_avro_serializer_round_trip(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    topic = unique("users")
    serializer = AvroSerializer(client, json.dumps(USER_V1))
    producer = Producer({"bootstrap.servers": registry.bootstrap_servers})
    sent = [{"name": f"user{i}", "age": 20 + i} for i in range(5)]
    ctx = SerializationContext(topic, MessageField.VALUE)
    for record in sent:
        producer.produce(topic, value=serializer(record, ctx))
    assert producer.flush(30) == 0

    raw = consume_all(registry.bootstrap_servers, topic, len(sent))
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.version == 1
    # Confluent's framing: magic byte 0 and the registry's id, big-endian
    assert {r[:5] for r in raw} == {b"\x00" + registered.schema_id.to_bytes(4, "big")}
    fresh = SchemaRegistryClient({"url": registry.url})  # no cached schemas: asks the registry
    deserializer = AvroDeserializer(fresh)
    assert [deserializer(r, ctx) for r in raw] == sent


def test_backward_refuses_a_new_field_without_default(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    subject = unique("backward")
    first = client.register_schema(subject, avro(USER_V1))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, avro(with_fields({"name": "email", "type": "string"})))
    assert refused.value.http_status_code == 409
    assert refused.value.error_code == 409
    message = refused.value.error_message
    assert message.startswith(
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}"'
    )
    assert (
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'email' at path "
        "'/fields/2' in the new schema has no default value and is missing in the old schema', "
        "additionalInfo:'email'}"
    ) in message
    assert "{oldSchemaVersion: 1}" in message
    assert "compatibility: 'BACKWARD'" in message
    # the allowed change (a default) is a new version with a new id
    second = client.register_schema(
        subject, avro(with_fields({"name": "email", "type": "string", "default": ""}))
    )
    assert second != first
    assert client.get_versions(subject) == [1, 2]


def test_forward_refuses_removing_a_field_without_default(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    subject = unique("forward")
    client.register_schema(subject, avro(with_fields({"name": "city", "type": "string",
                                                      "default": "x"})))
    client.set_compatibility(subject, "FORWARD")
    assert client.get_compatibility(subject) == "FORWARD"
    without_age = {**USER_V1, "fields": [USER_V1["fields"][0],  # type: ignore[index]
                                         {"name": "city", "type": "string", "default": "x"}]}
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, avro(without_age))
    assert refused.value.http_status_code == 409
    assert "The field 'age' at path '/fields/1' in the old schema has no default value" in (
        refused.value.error_message
    )
    assert "compatibility: 'FORWARD'" in refused.value.error_message
    # removing the field that has a default is a forward-compatible change
    client.register_schema(subject, avro(USER_V1))
    assert client.get_versions(subject) == [1, 2]


def test_identical_schemas_share_one_global_id(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    a, b = unique("same-a"), unique("same-b")
    schema = with_fields({"name": unique("f").replace("-", "_"), "type": "long", "default": 0})
    first = client.register_schema(a, avro(schema))
    # the same schema written differently (spacing, attribute order) is the same schema
    reordered = json.dumps(dict(reversed(list(schema.items()))), indent=2)
    second = client.register_schema(b, Schema(reordered, "AVRO"))
    assert first == second
    assert sorted(client.get_subjects_by_schema_id(first)) == sorted([a, b])
    assert client.lookup_schema(b, Schema(reordered, "AVRO")).version == 1


def test_soft_then_hard_delete(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    subject = unique("deletes")
    id1 = client.register_schema(subject, avro(USER_V1))
    id2 = client.register_schema(
        subject, avro(with_fields({"name": "tag", "type": "string", "default": ""}))
    )
    # a hard delete must follow a soft delete
    with pytest.raises(SchemaRegistryError) as early:
        client.delete_version(subject, 1, permanent=True)
    assert early.value.error_code == 40407
    assert client.delete_version(subject, 1) == 1
    assert client.get_versions(subject) == [2]
    with pytest.raises(SchemaRegistryError) as gone:
        client.get_version(subject, 1)
    assert gone.value.error_code == 40402
    # soft-deleted versions stay readable by id (consumers of old records keep working)
    assert json.loads(client.get_schema(id1).schema_str)["fields"] == USER_V1["fields"]
    assert client.delete_subject(subject) == [2]
    assert subject not in client.get_subjects()
    with pytest.raises(SchemaRegistryError) as soft:
        client.delete_subject(subject)
    assert soft.value.error_code == 40404
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_versions(subject)
    assert missing.value.error_code == 40401
    with pytest.raises(SchemaRegistryError) as no_id:
        SchemaRegistryClient({"url": registry.url}).get_schema(id2)
    assert no_id.value.error_code == 40403
    # registered again, a hard-deleted schema gets its old id back, versions restart at 1
    assert client.register_schema(subject, avro(USER_V1)) == id1
    assert client.get_versions(subject) == [1]


def test_avro_references(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    address_subject, user_subject = unique("address"), unique("user-ref")
    address = {"type": "record", "name": "Address", "namespace": "com.example",
               "fields": [{"name": "city", "type": "string"}]}
    client.register_schema(address_subject, avro(address))
    user = {"type": "record", "name": "Customer", "namespace": "com.example",
            "fields": [{"name": "name", "type": "string"},
                       {"name": "home", "type": "com.example.Address"}]}
    ref = SchemaReference("com.example.Address", address_subject, 1)
    user_id = client.register_schema(user_subject, Schema(json.dumps(user), "AVRO", [ref]))
    got = client.get_version(user_subject, 1)
    assert [(r.name, r.subject, r.version) for r in got.schema.references] == [
        ("com.example.Address", address_subject, 1)
    ]
    assert client._rest_client.get(f"subjects/{address_subject}/versions/1/referencedby") == [
        user_id
    ]
    with pytest.raises(SchemaRegistryError) as referenced:
        client.delete_version(address_subject, 1)
    assert referenced.value.error_code == 42206
    # a reference to a missing version is an invalid schema
    bad = Schema(json.dumps(user), "AVRO", [SchemaReference("com.example.Address",
                                                            address_subject, 7)])
    with pytest.raises(SchemaRegistryError) as invalid:
        client.register_schema(unique("user-bad"), bad)
    assert invalid.value.error_code == 42201
    # the serializer resolves the referenced type through the registry on both sides
    topic = unique("customers")
    serializer = AvroSerializer(
        client, Schema(json.dumps(user), "AVRO", [ref]),
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    ctx = SerializationContext(topic, MessageField.VALUE)
    client.register_schema(f"{topic}-value", Schema(json.dumps(user), "AVRO", [ref]))
    record = {"name": "ada", "home": {"city": "London"}}
    data = serializer(record, ctx)
    assert AvroDeserializer(SchemaRegistryClient({"url": registry.url}))(data, ctx) == record


def test_ids_and_versions_survive_a_restart(fresh_registry: RegistryBroker) -> None:
    client = SchemaRegistryClient({"url": fresh_registry.url})
    client.set_compatibility(level="FULL")
    ids = {}
    for i in range(3):
        subject = f"restart-{i}"
        ids[subject] = [
            client.register_schema(subject, avro(USER_V1)),
            client.register_schema(
                subject, avro(with_fields({"name": f"f{i}", "type": "int", "default": i}))
            ),
        ]
    client.delete_version("restart-2", 1)
    before = {s: [(v.version, v.schema_id, v.schema.schema_str) for v in
                  (client.get_version(s, n) for n in client.get_versions(s))] for s in ids}
    fresh_registry.restart()
    after_client = SchemaRegistryClient({"url": fresh_registry.url})
    after = {s: [(v.version, v.schema_id, v.schema.schema_str) for v in
                 (after_client.get_version(s, n) for n in after_client.get_versions(s))]
             for s in ids}
    assert after == before
    assert after_client.get_compatibility() == "FULL"
    # the next id continues after the highest one
    new_id = after_client.register_schema(
        "restart-new", avro({"type": "record", "name": "N", "fields": []})
    )
    assert new_id == max(i for pair in ids.values() for i in pair) + 1
