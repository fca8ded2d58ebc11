"""Schemas -> Iceberg types and values -> rows: Avro (fastavro), JSON Schema, Protobuf, the
Confluent framing, and a compatible new schema version evolving a real table."""

from __future__ import annotations

import datetime
import decimal
import io
import json
import struct
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestamptzType,
)

from tidelog.iceberg.avro_values import AvroCodec
from tidelog.iceberg.columns import table_schema
from tidelog.iceberg.json_values import JsonCodec
from tidelog.iceberg.record_columns import raw_columns
from tidelog.iceberg.rows import Group, RecordSorter, Sorted, batch_of, table_rows
from tidelog.iceberg.schemas import Codecs, UndecodableRecord, codec_of
from tidelog.iceberg.tables import Tables
from tidelog.iceberg.value_codec import UnsupportedSchema
from tidelog.records import Record
from tidelog.schema_registry.records import SchemaValue
from tidelog.schema_registry.schema_types import ParsedSchema, parse_schema

ORDER = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "price", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "raw", "type": "bytes"},
        {"name": "digest", "type": {"type": "fixed", "name": "D4", "size": 4}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal",
                                    "precision": 10, "scale": 2}},
        {"name": "ship", "type": {"type": "record", "name": "Ship", "fields": [
            {"name": "city", "type": "string"}]}},
        {"name": "back", "type": ["null", "Ship"], "default": None},
    ],
}


def _table(codec: Any, schema: Schema, partition: int, records: list[Record]) -> pa.Table:
    """The table rows of ``records`` (their values: payloads of ``codec``)."""
    raw = raw_columns(batch_of(records), partition, 0, 2**62)
    group = Group(codec, np.arange(len(records), dtype=np.int64), raw.column("value")
                  .combine_chunks())
    return table_rows(Sorted(raw, [group]), schema)


def _avro(schema: dict[str, Any], value: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), value)
    return buf.getvalue()


def test_avro_types() -> None:
    codec = AvroCodec(ORDER)
    types = {f.name: f.field_type for f in codec.fields}
    assert types["id"] == LongType() and types["qty"] == IntegerType()
    assert types["price"] == DoubleType() and types["note"] == StringType()
    assert isinstance(types["tags"], ListType) and types["tags"].element_type == StringType()
    assert isinstance(types["attrs"], MapType) and types["attrs"].value_type == LongType()
    assert types["kind"] == StringType() and types["raw"] == BinaryType()
    assert types["digest"] == FixedType(4) and types["at"] == TimestamptzType()
    assert types["day"] == DateType() and types["amount"] == DecimalType(10, 2)
    assert isinstance(types["ship"], StructType)
    assert types["back"] == types["ship"]  # a named type used again
    assert all(not f.required for f in codec.fields)


def test_avro_union_of_two_types_is_unsupported() -> None:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "x", "type": ["int", "string"]}]}
    with pytest.raises(UnsupportedSchema, match="union of 2 non-null types"):
        AvroCodec(schema)


@settings(max_examples=60, deadline=None)
@given(
    id_=st.integers(-(2**63), 2**63 - 1), qty=st.integers(-(2**31), 2**31 - 1),
    price=st.floats(allow_nan=False), note=st.none() | st.text(max_size=20),
    tags=st.lists(st.text(max_size=5), max_size=4),
    attrs=st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), max_size=3),
    raw=st.binary(max_size=16), at_ms=st.integers(0, 4_000_000_000_000),
    cents=st.integers(-(10**9), 10**9),
)
def test_avro_values_round_trip_to_arrow(id_: int, qty: int, price: float, note: str | None,
                                         tags: list[str], attrs: dict[str, int], raw: bytes,
                                         at_ms: int, cents: int) -> None:
    at = datetime.datetime.fromtimestamp(at_ms / 1000, datetime.UTC)
    value = {"id": id_, "qty": qty, "price": price, "note": note, "tags": tags,
             "attrs": attrs, "kind": "B", "raw": raw, "digest": b"abcd", "at": at,
             "day": datetime.date(2024, 2, 29), "amount": decimal.Decimal(cents).scaleb(-2),
             "ship": {"city": "Oslo"}, "back": None}
    codec = AvroCodec(ORDER)
    record = Record(7, at_ms, b"k", _avro(ORDER, value), [("h", b"1")])
    got = _table(codec, table_schema(codec.fields), 3, [record]).to_pylist()[0]
    assert got["kafka"]["partition"] == 3 and got["kafka"]["offset"] == 7
    assert got["kafka"]["headers"] == [{"key": "h", "value": b"1"}]
    assert got["id"] == id_ and got["qty"] == qty and got["note"] == note
    assert got["tags"] == tags and dict(got["attrs"]) == attrs and got["raw"] == raw
    assert got["at"] == at and got["amount"] == value["amount"]
    assert got["ship"] == {"city": "Oslo"} and got["back"] is None


def test_avro_trailing_bytes_do_not_parse() -> None:
    codec = AvroCodec({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    with pytest.raises(ValueError, match="left after"):
        codec.decode(b"\x02\x00\x00")


def test_json_schema_types_and_values() -> None:
    schema = {"type": "object", "properties": {
        "id": {"type": "integer"}, "name": {"type": ["null", "string"]},
        "score": {"type": "number"}, "ok": {"type": "boolean"},
        "at": {"type": "string", "format": "date-time"},
        "items": {"type": "array", "items": {"$ref": "#/definitions/Item"}}},
        "definitions": {"Item": {"type": "object", "properties": {"sku": {"type": "string"}}}}}
    codec = JsonCodec(schema)
    types = {f.name: f.field_type for f in codec.fields}
    assert types["id"] == LongType() and types["score"] == DoubleType()
    assert types["at"] == TimestamptzType() and isinstance(types["items"], ListType)
    row = codec.decode(json.dumps({"id": 5, "score": 2, "ok": True, "at": "2024-01-02T03:04:05Z",
                                   "items": [{"sku": "x"}]}).encode())
    assert row["score"] == 2.0 and row["name"] is None
    assert row["at"] == datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    assert row["items"] == [{"sku": "x"}]
    with pytest.raises(UnsupportedSchema):
        JsonCodec({"type": "object"})


PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string name = 2;
  repeated int32 sizes = 3;
  map<string, int64> counts = 4;
  Status status = 5;
  Line line = 6;
  google.protobuf.Timestamp at = 7;
  uint64 big = 8;
  message Line { string sku = 1; }
  enum Status { NEW = 0; PAID = 1; }
}
message Other { bool flag = 1; }
"""


def _resolve(ref: object) -> SchemaValue:
    raise AssertionError("no references here")


def test_protobuf_types_and_values() -> None:
    pytest.importorskip("grpc_tools")
    parsed: ParsedSchema = parse_schema("PROTOBUF", PROTO, [], _resolve)
    codec = codec_of(parsed, [0])
    types = {f.name: f.field_type for f in codec.fields}
    assert types["id"] == LongType() and types["sizes"] == ListType(
        types["sizes"].element_id, IntegerType(), element_required=False)  # type: ignore[attr-defined]
    assert isinstance(types["counts"], MapType) and types["status"] == StringType()
    assert isinstance(types["line"], StructType) and types["at"] == TimestamptzType()
    from google.protobuf import message_factory

    cls = message_factory.GetMessageClass(codec._cls.DESCRIPTOR)  # type: ignore[attr-defined]
    m = cls(id=9, name="n", sizes=[1, 2], status=1, big=2**64 - 1)
    m.counts["a"] = 3
    m.line.sku = "s"
    m.at.seconds = 1_700_000_000
    row = codec.decode(m.SerializeToString())
    assert row["id"] == 9 and row["sizes"] == [1, 2] and row["counts"] == {"a": 3}
    assert row["status"] == "PAID" and row["line"] == {"sku": "s"} and row["big"] == -1
    assert row["at"] == datetime.datetime.fromtimestamp(1_700_000_000, datetime.UTC)
    other = codec_of(parsed, [1])
    assert [f.name for f in other.fields] == ["flag"]


class _Source:
    def __init__(self, values: dict[int, SchemaValue], lagging: bool = False) -> None:
        self.values = values
        self.lagging = lagging

    def may_lag(self, schema_id: int) -> bool:
        return self.lagging and schema_id > max(self.values)

    def by_id(self, schema_id: int) -> SchemaValue | None:
        return self.values.get(schema_id)

    def latest(self, subject: str) -> SchemaValue | None:
        return max(self.values.values(), key=lambda v: v.version, default=None)

    def parse(self, value: SchemaValue) -> ParsedSchema:
        return parse_schema(value.schema_type, value.schema, value.references, _resolve)


def test_wire_format() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    codecs = Codecs(_Source({7: SchemaValue("t-value", 1, 7, json.dumps(schema))}))
    framed = struct.pack(">bI", 0, 7) + _avro(schema, {"a": 5})
    schema_id, codec, payload = codecs.split(framed)
    assert schema_id == 7 and codec.decode(payload) == {"a": 5}
    with pytest.raises(UndecodableRecord, match="unknown schema id 8"):
        codecs.split(struct.pack(">bI", 0, 8) + b"\x0a")
    with pytest.raises(UndecodableRecord, match="wire format"):
        codecs.split(b"\x01abcd")


def test_a_new_schema_version_adds_columns_without_rewriting(tmp_path: Path) -> None:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    tables = Tables(catalog, "kafka", tmp_path / "pending")
    v1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    v2 = {"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "long"}, {"name": "b", "type": ["null", "string"],
                                        "default": None}]}
    c1, c2 = AvroCodec(v1), AvroCodec(v2)
    table = tables.create("t", table_schema(c1.fields), "(hour(kafka.timestamp))")

    def append(codec: AvroCodec, start: int, value: dict[str, Any]) -> None:
        nonlocal table
        table = tables.evolve(table, table_schema(codec.fields))
        record = Record(start, 1_700_000_000_000, None, _avro(codec.schema, value), [])
        data = _table(codec, table.schema(), 0, [record])
        table = tables.commit(table, data, {0: start}, {0: start + 1}, {0: 0})

    append(c1, 0, {"a": 1})
    files_before = {t.file.file_path for t in table.scan().plan_files()}
    append(c2, 1, {"a": 2**40, "b": "x"})
    assert table.schema().find_field("a").field_type == LongType()  # int widened to long
    assert table.schema().find_field("b").field_type == StringType()
    files_after = {t.file.file_path for t in table.scan().plan_files()}
    assert files_before < files_after  # the first file is still there, not rewritten
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["kafka"]["offset"])
    assert [(r["a"], r["b"]) for r in rows] == [(1, None), (2**40, "x")]
    assert table.current_snapshot().summary["tidelog.offsets"] == '{"0": 2}'  # type: ignore[union-attr]


def test_a_schema_a_replicated_registry_has_not_read_yet_waits_then_dlq() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    source = _Source({7: SchemaValue("t-value", 1, 7, json.dumps(schema))}, lagging=True)
    known = Record(4, 0, None, struct.pack(">bI", 0, 7) + b"\x02", [])
    record = Record(5, 0, None, struct.pack(">bI", 0, 8) + b"\x02", [])
    below = Record(6, 0, None, struct.pack(">bI", 0, 3) + b"\x02", [])  # below the max id
    batches = batch_of([known, record, below])
    waiting = RecordSorter("t", "value_schema_id_prefix", Codecs(source), schema_wait_s=60)
    got = waiting.sort(0, batches, 4, 7)
    assert got.end == 5 and got.raw.num_rows == 1 and not got.dlq  # waits at offset 5
    assert [g.rows.tolist() for g in got.groups] == [[0]]
    given_up = RecordSorter("t", "value_schema_id_prefix", Codecs(source), schema_wait_s=0)
    got = given_up.sort(0, batches, 4, 7)
    assert got.end is None and got.dlq == {1: "unknown schema id 8", 2: "unknown schema id 3"}


def test_spark_packs_small_data_files_into_few_tasks() -> None:
    from tidelog.spark.iceberg_table import pack

    assert pack([("a", 10), ("b", 10), ("c", 10)], limit=25) == [["a", "b"], ["c"]]
    assert pack([("big", 100), ("s", 1)], limit=25) == [["big"], ["s"]]
    assert pack([]) == []


def test_a_commit_that_lost_a_race_fails_instead_of_rebasing(tmp_path: Path) -> None:
    """Two leaders (of partitions 0 and 1) append from the same snapshot: the second must not
    be re-based onto the first's snapshot with its stale offsets (pyiceberg's retry would)."""
    from pyiceberg.exceptions import CommitFailedException

    from tidelog.iceberg.tables import table_offsets

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    tables = Tables(catalog, "kafka", tmp_path / "pending")
    codec = AvroCodec({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    table = tables.create("t", table_schema(codec.fields), "()")

    def data(p: int, offset: int) -> Any:
        value = _avro(codec.schema, {"a": offset})
        return _table(codec, table.schema(), p, [Record(offset, 0, None, value, [])])

    a, b = catalog.load_table("kafka.t"), catalog.load_table("kafka.t")
    tables.commit(a, data(0, 0), {0: 0}, {0: 1}, {0: 0})
    with pytest.raises(CommitFailedException):
        tables.commit(b, data(1, 0), {1: 0}, {1: 1}, {1: 0})
    fresh = catalog.load_table("kafka.t")
    assert table_offsets(fresh.current_snapshot()).offsets == {0: 1}
    assert len(fresh.scan().to_arrow()) == 1
    data_files = list((tmp_path / "kafka" / "t" / "data").rglob("*.parquet"))
    assert len(data_files) == 1  # the losing commit's file is gone
    tables.commit(fresh, data(1, 0), {1: 0}, {1: 1}, {1: 0})  # from the new snapshot: fine
    assert table_offsets(catalog.load_table("kafka.t").current_snapshot()).offsets == {
        0: 1, 1: 1}


BULK = {**ORDER, "fields": [f for f in ORDER["fields"] if f["name"] not in ("attrs", "back")]}


def _bulk_value(i: int) -> dict[str, Any]:
    return {"id": i, "qty": -i, "price": i / 3, "note": None if i % 2 else f"n{i}",
            "tags": ["t"] * (i % 3), "kind": "AB"[i % 2], "raw": bytes(i % 7),
            "digest": b"abcd", "at": datetime.datetime.fromtimestamp(i, datetime.UTC),
            "day": datetime.date(2024, 2, 29), "amount": decimal.Decimal(i).scaleb(-2),
            "ship": {"city": f"c{i}"}}


def _reference(codec: Any, payloads: pa.Array, target: pa.StructType) -> Any:
    """The value-by-value decode (the reference every bulk path must equal)."""
    from tidelog.iceberg.value_codec import ValueCodec

    return ValueCodec.decode_column(codec, payloads, target)


def test_avro_in_bulk_equals_value_by_value() -> None:
    """Polars' block read (avro_bulk) gives the very columns fastavro gives one by one."""
    from tidelog.iceberg.columns import KAFKA, arrow_schema

    codec = AvroCodec(BULK)
    assert codec._bulk_header is not None  # this schema is read in bulk
    target = pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])
    payloads = pa.array([_avro(BULK, _bulk_value(i)) for i in range(200)], pa.binary())
    bulk, bad = codec.decode_column(payloads, target)
    ref, ref_bad = _reference(codec, payloads, target)
    assert not bad and not ref_bad and bulk.equals(ref)
    assert codec._bulk_header is not None  # still in bulk


@pytest.mark.parametrize("damage", ["trailing", "truncated"])
def test_a_bad_avro_value_among_many_is_found_alone(damage: str) -> None:
    """A value with bytes left over, or one cut short, shifts the values after it in a
    block: the block is refused (its row numbers do not read back) and the values are
    decoded one by one, so only the bad one has no row."""
    from tidelog.iceberg.columns import KAFKA, arrow_schema

    codec = AvroCodec(BULK)
    target = pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])
    values = [_avro(BULK, _bulk_value(i)) for i in range(50)]
    values[20] = values[20] + b"\x00" if damage == "trailing" else values[20][:-3]
    got, bad = codec.decode_column(pa.array(values, pa.binary()), target)
    assert list(bad) == [20]
    rows = got.to_pylist()
    assert rows[20] is None and rows[21]["id"] == 21 and rows[49]["id"] == 49
    assert codec._bulk_header is not None  # a bad value does not end bulk reads


def test_a_schema_polars_cannot_read_is_decoded_value_by_value() -> None:
    codec = AvroCodec(ORDER)  # a map and a reference to a named type
    assert codec._bulk_header is None


JSON_ORDER = {"type": "object", "properties": {
    "id": {"type": "integer"}, "name": {"type": ["null", "string"]},
    "score": {"type": "number"}, "ok": {"type": "boolean"},
    "at": {"type": "string", "format": "date-time"}, "day": {"type": "string", "format": "date"},
    "items": {"type": "array", "items": {"$ref": "#/definitions/Item"}}},
    "definitions": {"Item": {"type": "object", "properties": {"sku": {"type": "string"}}}}}


def _json_value(i: int) -> bytes:
    value: dict[str, Any] = {"id": i, "score": i if i % 2 else i / 4, "ok": bool(i % 3),
                             "at": f"2024-01-02T03:04:{i % 60:02d}{'Z' if i % 2 else '+02:00'}",
                             "day": "2024-02-29", "items": [{"sku": f"s{i}"}] * (i % 3),
                             "extra": {"ignored": True}}
    if i % 5:
        value["name"] = f"n{i}"
    out = json.dumps(value, indent=2 if i % 7 == 0 else None).encode()  # newlines too
    return out.replace(b"\n", b"\r\n") if i % 11 == 0 else out  # and carriage returns


def test_json_in_bulk_equals_value_by_value() -> None:
    from tidelog.iceberg.columns import KAFKA, arrow_schema

    codec = JsonCodec(JSON_ORDER)
    target = pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])
    payloads = pa.array([_json_value(i) for i in range(120)], pa.binary())
    from tidelog.iceberg import json_bulk

    bulk = json_bulk.decode(payloads, target)
    ref, bad = _reference(codec, payloads, target)
    assert not bad and bulk.equals(ref)
    assert codec.decode_column(payloads, target)[0].equals(ref)


@pytest.mark.parametrize("bad_value", [b'{"id": 1', b'{"id": 1} {"id": 2}', b"",
                                       b'{"id": "x"}', b"[1]"])
def test_a_bad_json_value_among_many_is_found_alone(bad_value: bytes) -> None:
    from tidelog.iceberg.columns import KAFKA, arrow_schema

    codec = JsonCodec(JSON_ORDER)
    target = pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])
    values = [_json_value(i) for i in range(30)]
    values[12] = bad_value
    got, bad = codec.decode_column(pa.array(values, pa.binary()), target)
    assert list(bad) == [12]
    rows = got.to_pylist()
    assert rows[12] is None and rows[13]["id"] == 13 and rows[29]["id"] == 29


def test_record_columns_of_mixed_records() -> None:
    """The columnar decode gives each record's coordinates as the record itself has them:
    null keys and values, no headers (an empty list), headers with null values, gaps."""
    records = [Record(10, 1_700_000_000_001, None, b"a", []),
               Record(11, 1_700_000_000_002, b"k", None, [("h", None), ("i", b"2")]),
               Record(14, 1_700_000_000_003, b"", b"", [])]
    raw = raw_columns(batch_of(records), 4, 11, 100)  # from offset 11 on
    rows = raw.to_pylist()
    assert [r["offset"] for r in rows] == [11, 14] and {r["partition"] for r in rows} == {4}
    assert rows[0]["key"] == b"k" and rows[0]["value"] is None
    assert rows[0]["headers"] == [{"key": "h", "value": None}, {"key": "i", "value": b"2"}]
    assert rows[1]["headers"] == [] and rows[1]["key"] == b"" and rows[1]["value"] == b""
    assert rows[1]["timestamp"] == datetime.datetime.fromtimestamp(1_700_000_000.003,
                                                                   datetime.UTC)


def test_one_partition_is_written_as_pyiceberg_writes_it(tmp_path: Path) -> None:
    """Rows of one hour: one data file whose partition and counts are the ones pyiceberg's
    own split gives; rows of two hours: pyiceberg's split (a file per hour)."""
    import uuid

    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    from tidelog.iceberg.data_files import data_files, single_partition

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    tables = Tables(catalog, "kafka", tmp_path / "pending")
    codec = AvroCodec({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
    table = tables.create("t", table_schema(codec.fields), "(hour(kafka.timestamp), a)")

    def rows(stamps: list[int]) -> pa.Table:
        records = [Record(i, ts, None, _avro(codec.schema, {"a": 7}), [])
                   for i, ts in enumerate(stamps)]
        return _table(codec, table.schema(), 0, records)

    hour = 1_700_000_000_000 - 1_700_000_000_000 % 3_600_000
    one = rows([hour + i * 1000 for i in range(50)])
    meta = table.metadata
    assert single_partition(meta, one) is not None
    ours = list(data_files(meta, one, table.io, uuid.uuid4()))
    theirs = list(_dataframe_to_data_files(table_metadata=meta, df=one, io=table.io,
                                           write_uuid=uuid.uuid4()))
    assert [(f.partition, f.record_count) for f in ours] == [
        (f.partition, f.record_count) for f in theirs] and len(ours) == 1
    for metric in ("lower_bounds", "upper_bounds", "value_counts", "null_value_counts",
                   "nan_value_counts", "split_offsets"):
        assert getattr(ours[0], metric) == getattr(theirs[0], metric), metric
    write_uuid = uuid.uuid4()
    (written,) = data_files(meta, one, table.io, write_uuid)
    assert str(write_uuid) in written.file_path
    footer = pq.ParquetFile(written.file_path.removeprefix("file://")).metadata
    encodings = {footer.row_group(0).column(i).path_in_schema:
                 footer.row_group(0).column(i).encodings for i in range(footer.num_columns)}
    assert "RLE_DICTIONARY" not in encodings["kafka.offset"]  # 50 distinct offsets
    assert "RLE_DICTIONARY" in encodings["a"]  # one value 50 times
    assert footer.schema.to_arrow_schema().field("a").metadata[b"PARQUET:field_id"] == str(
        table.schema().find_field("a").field_id).encode()
    two = rows([hour + 1000, hour + 3_600_000 + 1000])
    assert single_partition(meta, two) is None
    assert len(list(data_files(meta, two, table.io, uuid.uuid4()))) == 2


FRAME = b"\x00\x00\x00\x0a\x0d"  # magic byte, schema id 0x0a0d (a newline and a return)


@pytest.mark.parametrize("kind", ["avro", "json"])
def test_framed_values_decode_as_their_payloads(kind: str) -> None:
    """Values still in Confluent's framing (``skip=5``, dropped in the decode's own pass
    over them), from the middle of a larger array, give the columns of their payloads; a
    bad one among them is found alone, with the same row number."""
    from tidelog.iceberg.columns import KAFKA, arrow_schema

    codec: Any = AvroCodec(BULK) if kind == "avro" else JsonCodec(JSON_ORDER)
    target = pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])
    payloads = [_avro(BULK, _bulk_value(i)) if kind == "avro" else _json_value(i)
                for i in range(80)]
    framed = pa.array([b"x"] * 3 + [FRAME + p for p in payloads], pa.binary()).slice(3)
    ref, ref_bad = _reference(codec, pa.array(payloads, pa.binary()), target)
    got, bad = codec.decode_column(framed, target, 5)
    assert not bad and not ref_bad and got.equals(ref)
    if kind == "avro":
        assert codec._bulk_header is not None  # read in bulk, not one by one
    else:
        from tidelog.iceberg import json_bulk

        assert json_bulk.decode(framed, target, 5).equals(ref)
    broken = [FRAME + p for p in payloads]
    broken[33] = broken[33][:-2]
    broken[60] = FRAME[:3]  # shorter than its framing
    got, bad = codec.decode_column(pa.array(broken, pa.binary()), target, 5)
    assert sorted(bad) == [33, 60]
    rows = got.to_pylist()
    assert rows[32] == ref.to_pylist()[32] and rows[79] == ref.to_pylist()[79]
