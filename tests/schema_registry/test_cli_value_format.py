"""`tidelog produce` / `tidelog consume` with --value-format avro|json|protobuf, as
Confluent's kafka-avro-console-producer and -consumer: JSON lines in, Confluent-framed
values on the topic (readable by confluent-kafka's deserializers), JSON lines out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka import Consumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from registry_support import RegistryBroker

SCHEMAS = {
    "avro": json.dumps({"type": "record", "name": "Line", "fields": [
        {"name": "n", "type": "int"}, {"name": "s", "type": ["null", "string"]}]}),
    "json": json.dumps({"type": "object", "properties": {"n": {"type": "integer"},
                                                         "s": {"type": ["string", "null"]}},
                        "required": ["n"]}),
    "protobuf": 'syntax = "proto3";\npackage cli;\nmessage Line { int32 n = 1; string s = 2; }\n',
}
LINES = [{"n": 1, "s": "one"}, {"n": 2, "s": "two"}, {"n": 3, "s": "three"}]


def tidelog(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tidelog.cli.main", *args], input=stdin,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.mark.parametrize("fmt", ["avro", "json", "protobuf"])
def test_produce_and_consume_with_a_value_format(registry: RegistryBroker, fmt: str) -> None:
    topic = f"cli-{fmt}"
    common = ["--bootstrap-server", registry.bootstrap_servers, "--topic", topic,
              "--value-format", fmt, "--schema-registry", registry.url]
    lines = "".join(json.dumps(line) + "\n" for line in LINES)
    done = tidelog("produce", *common, "--value-schema", SCHEMAS[fmt], stdin=lines)
    assert done.returncode == 0, done.stderr
    # a line that does not fit the schema is skipped and counted, as unparseable lines are
    bad = tidelog("produce", *common, "--value-schema", SCHEMAS[fmt], stdin='{"n": "x"}\n')
    assert bad.returncode == 1 and "does not fit the schema" in bad.stderr
    out = tidelog("consume", *common, "--from-beginning", "--max-messages", "3")
    assert out.returncode == 0, out.stderr
    assert [json.loads(line) for line in out.stdout.splitlines()] == LINES
    client = SchemaRegistryClient({"url": registry.url})
    assert client.get_latest_version(f"{topic}-value").schema.schema_type == fmt.upper()
    if fmt == "avro":  # the values are Confluent's: confluent-kafka's deserializer reads them
        consumer = Consumer({"bootstrap.servers": registry.bootstrap_servers,
                             "group.id": topic, "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        msg = None
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                break
        consumer.close()
        assert msg is not None
        ctx = SerializationContext(topic, MessageField.VALUE)
        assert AvroDeserializer(client)(msg.value(), ctx) == LINES[0]
