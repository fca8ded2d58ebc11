"""The REST API as Confluent's documentation and clients use it, asserted on raw answers:
paths, error codes and messages, content types, config and mode, the compatibility endpoint,
and the ``_schemas`` records themselves (Confluent's key/value JSON, loaded as is)."""

from __future__ import annotations

import json
import uuid

from confluent_kafka import Consumer, Producer
from registry_support import CONTENT_TYPE, RegistryBroker, call

REC = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def schema(fields: list[dict[str, object]], name: str = "R") -> dict[str, str]:
    return {"schema": json.dumps({"type": "record", "name": name, "fields": fields})}


def test_errors_and_content_type(registry: RegistryBroker) -> None:
    url, subject = registry.url, unique("errors")
    status, body, ctype = call(url, "GET", f"/subjects/{subject}/versions")
    assert (status, body) == (404, {"error_code": 40401,
                                    "message": f"Subject '{subject}' not found."})
    assert ctype.startswith(CONTENT_TYPE)
    assert call(url, "POST", f"/subjects/{subject}/versions", {"schema": "{not json"})[1][
        "error_code"] == 42201
    assert call(url, "POST", f"/subjects/{subject}/versions",
                {"schema": json.dumps({"type": "record", "name": "X",
                                       "fields": [{"name": "a", "type": "nope"}]})})[0] == 422
    call(url, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(REC)})
    assert call(url, "GET", f"/subjects/{subject}/versions/7")[1]["error_code"] == 40402
    status, body, _ = call(url, "GET", f"/subjects/{subject}/versions/abc")
    assert (status, body["error_code"]) == (422, 42202)
    assert call(url, "GET", "/schemas/ids/999999")[1] == {
        "error_code": 40403, "message": "Schema 999999 not found"}
    assert call(url, "POST", f"/subjects/{subject}", schema([{"name": "z", "type": "long"}]))[
        1] == {"error_code": 40403, "message": "Schema not found"}
    assert call(url, "PUT", "/config/" + subject, {"compatibility": "SIDEWAYS"})[1][
        "error_code"] == 42203
    assert call(url, "PUT", "/mode/" + subject, {"mode": "WRITEONLY"})[1]["error_code"] == 42204
    assert call(url, "GET", f"/config/{subject}")[1]["error_code"] == 40408
    assert call(url, "GET", f"/mode/{subject}")[1]["error_code"] == 40409
    assert call(url, "GET", "/no/such/path")[:2] == (
        404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    # a client asking for plain JSON gets it
    assert call(url, "GET", "/schemas/types", headers={"Accept": "application/json"})[2] \
        .startswith("application/json")
    assert call(url, "GET", "/schemas/types")[1] == ["AVRO", "JSON", "PROTOBUF"]


def test_versions_lookup_and_latest(registry: RegistryBroker) -> None:
    url, subject = registry.url, unique("versions")
    name = subject.replace("-", "_")  # a schema of this test's own
    rec = {"type": "record", "name": name, "fields": [{"name": "a", "type": "int"}]}
    first = call(url, "POST", f"/subjects/{subject}/versions", schema([{"name": "a", "type": "int"}], name))
    second = call(url, "POST", f"/subjects/{subject}/versions",
                  schema([{"name": "a", "type": "int"}, {"name": "b", "type": "string",
                                                         "default": "x"}], name))
    assert first[1]["id"] != second[1]["id"]
    latest = call(url, "GET", f"/subjects/{subject}/versions/latest")[1]
    assert latest == call(url, "GET", f"/subjects/{subject}/versions/-1")[1]
    assert (latest["subject"], latest["version"], latest["id"]) == (subject, 2, second[1]["id"])
    assert "schemaType" not in latest  # AVRO is the default and left out, as Confluent does
    raw = call(url, "GET", f"/subjects/{subject}/versions/1/schema")[1]
    assert raw == rec
    found = call(url, "POST", f"/subjects/{subject}",
                 {"schema": json.dumps(rec, indent=4)})[1]
    assert (found["version"], found["id"]) == (1, first[1]["id"])
    assert call(url, "GET", f"/schemas/ids/{first[1]['id']}/versions")[1] == [
        {"subject": subject, "version": 1}]
    assert subject in call(url, "GET", f"/schemas/ids/{first[1]['id']}/subjects")[1]


def test_compatibility_endpoint_and_levels(registry: RegistryBroker) -> None:
    url, subject = registry.url, unique("levels")
    v1 = [{"name": "a", "type": "int"}]
    v2 = [*v1, {"name": "b", "type": "string", "default": ""}]
    v3 = [{"name": "b", "type": "string", "default": ""}]  # drops a (no default): not FORWARD
    call(url, "PUT", f"/config/{subject}", {"compatibility": "BACKWARD"})
    for fields in (v1, v2):
        assert call(url, "POST", f"/subjects/{subject}/versions", schema(fields))[0] == 200

    def compatible(fields: list[dict[str, object]], level: str, version: str = "latest") -> bool:
        assert call(url, "PUT", f"/config/{subject}", {"compatibility": level})[1] == {
            "compatibility": level}
        answer = call(url, "POST", f"/compatibility/subjects/{subject}/versions/{version}",
                      schema(fields))[1]
        return bool(answer["is_compatible"])

    assert compatible(v3, "BACKWARD")  # latest (v2) has b: reading old data with v3 works
    assert compatible(v3, "BACKWARD_TRANSITIVE")  # v1 lacks b, but b has a default
    assert not compatible(v3, "FORWARD")  # v2 cannot read v3 data: a missing, no default
    assert not compatible(v3, "FULL")
    assert compatible(v3, "NONE")
    assert not compatible([{"name": "a", "type": "string"}], "BACKWARD", "1")
    assert compatible([{"name": "a", "type": "long"}], "BACKWARD", "1")  # int promotes to long
    assert not compatible([{"name": "a", "type": "long"}], "FORWARD", "1")
    # verbose answers carry Confluent's messages
    call(url, "PUT", f"/config/{subject}", {"compatibility": "BACKWARD"})
    answer = call(url, "POST",
                  f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
                  schema([{"name": "a", "type": "int"}, {"name": "c", "type": "int"}]))[1]
    assert answer["is_compatible"] is False
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in answer["messages"][0]
    # a field without default, added then dropped: FULL checks only the latest version,
    # FULL_TRANSITIVE every one
    assert compatible([*v1, {"name": "c", "type": "int", "default": 0}], "FULL")
    assert compatible([{"name": "b", "type": "string", "default": ""}, *v1], "FULL_TRANSITIVE")
    status, body, _ = call(url, "DELETE", f"/config/{subject}")
    assert (status, body) == (200, {"compatibilityLevel": "FULL_TRANSITIVE"})
    assert call(url, "GET", f"/config/{subject}")[1]["error_code"] == 40408


def test_modes(fresh_registry: RegistryBroker) -> None:
    url, subject = fresh_registry.url, "moded"
    assert call(url, "GET", "/mode")[1] == {"mode": "READWRITE"}
    assert call(url, "PUT", f"/mode/{subject}", {"mode": "READONLY"})[1] == {"mode": "READONLY"}
    refused = call(url, "POST", f"/subjects/{subject}/versions", {"schema": json.dumps(REC)})
    assert refused[:2] == (422, {"error_code": 42205,
                                 "message": f"Subject {subject} is in read-only mode"})
    assert call(url, "DELETE", f"/mode/{subject}")[1] == {"mode": "READONLY"}
    call(url, "POST", "/subjects/other/versions", {"schema": json.dumps(REC)})
    # IMPORT needs an empty registry (or force), then takes ids and versions as given
    assert call(url, "PUT", "/mode", {"mode": "IMPORT"})[1]["error_code"] == 42205
    assert call(url, "PUT", "/mode?force=true", {"mode": "IMPORT"})[1] == {"mode": "IMPORT"}
    imported = {"schema": json.dumps({**REC, "name": "Imported"}), "id": 500, "version": 3}
    assert call(url, "POST", "/subjects/imported/versions", imported)[1] == {"id": 500}
    assert call(url, "GET", "/subjects/imported/versions")[1] == [3]
    call(url, "PUT", "/mode", {"mode": "READWRITE"})
    ids = call(url, "POST", "/subjects/after/versions",
               {"schema": json.dumps({**REC, "name": "After"})})[1]
    assert ids == {"id": 501}  # ids continue after the highest one seen
    with_id = call(url, "POST", "/subjects/after/versions", {**imported, "version": 0})
    assert with_id[1]["error_code"] == 42205  # ids may only be given in IMPORT mode


def read_records(bootstrap: str, topic: str = "_schemas") -> list[tuple[object, object]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"),
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    consumer.subscribe([topic])
    out: list[tuple[object, object]] = []
    try:
        for _ in range(100):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                break  # end of the partition
            value = msg.value()
            out.append((json.loads(msg.key()), None if value is None else json.loads(value)))
    finally:
        consumer.close()
    return out


def test_schemas_topic_holds_confluent_records(fresh_registry: RegistryBroker) -> None:
    url = fresh_registry.url
    call(url, "POST", "/subjects/t-value/versions", {"schema": json.dumps(REC)})
    call(url, "PUT", "/config/t-value", {"compatibility": "FULL"})
    call(url, "DELETE", "/subjects/t-value")
    records = read_records(fresh_registry.bootstrap_servers)
    keys = [k for k, _ in records]
    assert {"keytype": "NOOP", "magic": 0} in keys
    assert (
        {"keytype": "SCHEMA", "subject": "t-value", "version": 1, "magic": 1},
        {"subject": "t-value", "version": 1, "id": 1, "schema": json.dumps(REC, separators=(",", ":")),
         "deleted": False},
    ) in records
    assert ({"keytype": "CONFIG", "subject": "t-value", "magic": 0},
            {"subject": "t-value", "compatibilityLevel": "FULL"}) in records
    assert ({"keytype": "DELETE_SUBJECT", "subject": "t-value", "magic": 0},
            {"subject": "t-value", "version": 1}) in records


def test_a_topic_written_by_confluent_loads_as_is(fresh_registry: RegistryBroker) -> None:
    """Records as a Confluent registry writes them, appended behind the registry's back, are
    read back (after a restart) as that registry's state."""
    producer = Producer({"bootstrap.servers": fresh_registry.bootstrap_servers})
    confluent = [
        ('{"keytype":"SCHEMA","subject":"legacy","version":1,"magic":1}',
         '{"subject":"legacy","version":1,"id":41,"schema":"\\"string\\"","deleted":false}'),
        ('{"keytype":"SCHEMA","subject":"legacy","version":2,"magic":1}',
         '{"subject":"legacy","version":2,"id":42,"schemaType":"JSON",'
         '"schema":"{\\"type\\":\\"string\\"}","deleted":false}'),
        ('{"keytype":"CONFIG","subject":null,"magic":0}', '{"compatibilityLevel":"NONE"}'),
        ('{"keytype":"MODE","subject":"legacy","magic":0}', '{"mode":"READONLY"}'),
        ('{"keytype":"SOMETHING_NEWER","magic":0}', '{"x":1}'),
    ]
    for key, value in confluent:
        producer.produce("_schemas", key=key.encode(), value=value.encode(), partition=0)
    assert producer.flush(30) == 0
    fresh_registry.restart()
    url = fresh_registry.url
    assert call(url, "GET", "/subjects/legacy/versions")[1] == [1, 2]
    assert call(url, "GET", "/schemas/ids/42")[1] == {"schemaType": "JSON",
                                                      "schema": '{"type":"string"}'}
    assert call(url, "GET", "/config")[1] == {"compatibilityLevel": "NONE"}
    assert call(url, "GET", "/mode/legacy")[1] == {"mode": "READONLY"}
    assert call(url, "POST", "/subjects/new/versions", {"schema": '"int"'})[1] == {"id": 43}


def test_registering_a_soft_deleted_schema_again(registry: RegistryBroker) -> None:
    """A new version with the old id; the soft-deleted copy is tombstoned, as Confluent does."""
    url, subject = registry.url, unique("again")
    rec = schema([{"name": "a", "type": "int"}], subject.replace("-", "_"))
    first = call(url, "POST", f"/subjects/{subject}/versions", rec)[1]["id"]
    assert call(url, "DELETE", f"/subjects/{subject}/versions/1")[1] == 1
    assert call(url, "POST", f"/subjects/{subject}/versions", rec)[1] == {"id": first}
    assert call(url, "GET", f"/subjects/{subject}/versions?deleted=true")[1] == [2]
