"""Avro's resolution rules as the registry applies them (Apache Avro's SchemaCompatibility):
each case is a reader and a writer schema and the incompatibility types expected, checked
against fastavro actually decoding writer data with the reader schema where that applies."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest

from tidelog.schema_registry.avro_compat import reader_writer_incompatibilities
from tidelog.schema_registry.avro_type import AvroSchema
from tidelog.schema_registry.records import Reference, SchemaValue


def parse(schema: Any) -> AvroSchema:
    def no_refs(ref: Reference) -> SchemaValue:
        raise AssertionError(ref)

    return AvroSchema(json.dumps(schema), [], no_refs)


def rec(*fields: dict[str, Any], name: str = "R", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


ENUM = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
CASES: list[tuple[str, Any, Any, list[str], Any]] = [
    # (case, reader, writer, incompatibility types, a writer datum)
    ("int promotes to long", "long", "int", [], 7),
    ("int promotes to double", "double", "int", [], 7),
    ("long does not narrow to int", "int", "long", ["TYPE_MISMATCH"], None),
    ("string reads bytes", "string", "bytes", [], b"ab"),
    ("float promotes to double", "double", "float", [], 1.5),
    ("double to float", "float", "double", ["TYPE_MISMATCH"], None),
    ("new field with default", rec({"name": "a", "type": "int"},
                                   {"name": "b", "type": "string", "default": "x"}),
     rec({"name": "a", "type": "int"}), [], {"a": 1}),
    ("new field without default", rec({"name": "a", "type": "int"}, {"name": "b", "type": "int"}),
     rec({"name": "a", "type": "int"}), ["READER_FIELD_MISSING_DEFAULT_VALUE"], None),
    ("field found by alias", rec({"name": "b", "type": "int", "aliases": ["a"]}),
     rec({"name": "a", "type": "int"}), [], {"a": 3}),
    ("record renamed with alias", rec({"name": "a", "type": "int"}, name="S", aliases=["R"]),
     rec({"name": "a", "type": "int"}), [], {"a": 3}),
    ("record renamed", rec({"name": "a", "type": "int"}, name="S"),
     rec({"name": "a", "type": "int"}), ["NAME_MISMATCH"], None),
    ("enum symbol added", {**ENUM, "symbols": ["A", "B", "C"]}, ENUM, [], "B"),
    ("enum symbol removed", {**ENUM, "symbols": ["A"]}, ENUM, ["MISSING_ENUM_SYMBOLS"], None),
    ("enum symbol removed, reader default", {**ENUM, "symbols": ["A"], "default": "A"}, ENUM,
     [], "B"),
    ("union gains a branch", ["null", "int", "string"], ["null", "int"], [], 5),
    ("union loses a branch", ["null"], ["null", "int"], ["MISSING_UNION_BRANCH"], None),
    ("plain to union", ["null", "long"], "int", [], 5),
    ("union to plain", "long", ["null", "int"], ["TYPE_MISMATCH"], None),
    ("fixed size", {"type": "fixed", "name": "F", "size": 4},
     {"type": "fixed", "name": "F", "size": 8}, ["FIXED_SIZE_MISMATCH"], None),
    ("array items promote", {"type": "array", "items": "long"},
     {"type": "array", "items": "int"}, [], [1, 2]),
    ("map values change", {"type": "map", "values": "int"},
     {"type": "map", "values": "string"}, ["TYPE_MISMATCH"], None),
    ("recursive list", rec({"name": "next", "type": ["null", "R"], "default": None}),
     rec({"name": "next", "type": ["null", "R"], "default": None}), [], {"next": {"next": None}}),
]


@pytest.mark.parametrize(("case", "reader", "writer", "expected", "datum"), CASES,
                         ids=[c[0] for c in CASES])
def test_resolution(case: str, reader: Any, writer: Any, expected: list[str], datum: Any) -> None:
    found = reader_writer_incompatibilities(parse(reader).schema, parse(writer).schema)
    assert sorted({f.type for f in found}) == expected
    if datum is not None:  # compatible: a real decoder reads writer data with the reader
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, fastavro.parse_schema(writer), datum)
        buf.seek(0)
        fastavro.schemaless_reader(buf, fastavro.parse_schema(writer), fastavro.parse_schema(reader))


def test_locations_and_messages() -> None:
    reader = rec({"name": "a", "type": "int"},
                 {"name": "inner", "type": rec({"name": "x", "type": "long"},
                                               {"name": "y", "type": "int"}, name="I")})
    writer = rec({"name": "a", "type": "int"},
                 {"name": "inner", "type": rec({"name": "x", "type": "string"}, name="I")})
    found = reader_writer_incompatibilities(parse(reader).schema, parse(writer).schema)
    assert [(f.type, f.location, f.message) for f in found] == [
        ("TYPE_MISMATCH", "/fields/1/type/fields/0/type",
         "reader type: LONG not compatible with writer type: STRING"),
        ("READER_FIELD_MISSING_DEFAULT_VALUE", "/fields/1/type/fields/1", "y"),
    ]


def test_canonical_form_is_avro_javas() -> None:
    text = json.dumps({"namespace": "a.b", "name": "R", "type": "record", "doc": "d",
                       "fields": [{"type": {"type": "int", "logicalType": "date"}, "name": "d"},
                                  {"name": "s", "type": {"name": "S", "type": "record",
                                                         "namespace": "a.b", "fields": []}},
                                  {"name": "o", "type": {"name": "x.O", "type": "fixed",
                                                         "size": 2}},
                                  {"name": "again", "type": "S", "default": {}}]})
    assert parse(json.loads(text)).canonical() == (
        '{"type":"record","name":"R","namespace":"a.b","doc":"d","fields":['
        '{"name":"d","type":{"type":"int","logicalType":"date"}},'
        '{"name":"s","type":{"type":"record","name":"S","fields":[]}},'
        '{"name":"o","type":{"type":"fixed","name":"O","namespace":"x","size":2}},'
        '{"name":"again","type":"S","default":{}}]}'
    )
