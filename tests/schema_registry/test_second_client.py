"""A second, independent registry client (python-schema-registry-client: httpx and fastavro,
its own message serializer) against tidelog's registry, crossing records with confluent-kafka's
serializers through a tidelog topic."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from registry_support import RegistryBroker
from schema_registry.client import SchemaRegistryClient, schema
from schema_registry.serializers import AvroMessageSerializer

EVENT = {"type": "record", "name": "Event", "namespace": "second.client",
         "fields": [{"name": "kind", "type": "string"}, {"name": "n", "type": "long"}]}


def test_python_schema_registry_client(registry: RegistryBroker) -> None:
    client = SchemaRegistryClient(url=registry.url)
    subject = f"second-{uuid.uuid4().hex[:8]}"
    avro = schema.AvroSchema(EVENT)
    schema_id = client.register(subject, avro)
    assert client.register(subject, avro) == schema_id  # idempotent
    assert subject in client.get_subjects()
    assert client.get_versions(subject) == [1]
    found = client.get_by_id(schema_id)
    assert found is not None and found.schema == avro.schema
    assert client.check_version(subject, avro).schema_id == schema_id
    assert client.get_compatibility() == "BACKWARD"
    evolved = schema.AvroSchema({**EVENT, "fields": [*EVENT["fields"],  # type: ignore[list-item]
                                                     {"name": "extra", "type": "int"}]})
    assert client.test_compatibility(subject, evolved) is False
    assert client.update_compatibility("NONE", subject) is True
    assert client.test_compatibility(subject, evolved) is True

    # its serializer writes, confluent-kafka's deserializer reads, through a tidelog topic
    topic = f"events-{uuid.uuid4().hex[:8]}"
    serializer = AvroMessageSerializer(client)
    events = [{"kind": "click", "n": i} for i in range(4)]
    producer = Producer({"bootstrap.servers": registry.bootstrap_servers})
    for e in events:
        producer.produce(topic, value=serializer.encode_record_with_schema(f"{topic}-value",
                                                                           avro, e))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": registry.bootstrap_servers,
                         "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    for _ in range(200):
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(msg.value())
        if len(values) == len(events):
            break
    consumer.close()
    ctx = SerializationContext(topic, MessageField.VALUE)
    confluent = AvroDeserializer(ConfluentClient({"url": registry.url}))
    assert [confluent(v, ctx) for v in values] == events
    assert [serializer.decode_message(v) for v in values] == events
    assert json.loads(ConfluentClient({"url": registry.url}).get_latest_version(
        f"{topic}-value").schema.schema_str)["name"] == "Event"
