"""Many Avro values of one writer schema decoded in one call: the payloads are laid end to
end as one block of an Avro object container (the format's own framing: a header with the
schema, then a block of N datums) and Polars' native Avro reader decodes the block into
Arrow columns. fastavro's schemaless reader, one value at a time, is the reference and the
fallback.

Datums in a block have no boundaries of their own, so a value with trailing bytes or one cut
short would shift every value after it. Each datum is therefore followed by a 4-byte
sentinel (its row number, an Avro ``fixed`` field appended to the record): the block is
taken only if every row reads back its own number and the types cast to the table's columns;
otherwise the caller decodes the values one by one, which finds the bad ones."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from tidelog.records.varint import encode_varint  # an Avro long is a zig-zag varint

from .columns import VALUE

SENTINEL = "__tidelog_row"
_SYNC = b"tidelog-iceberg!"  # the container's 16-byte sync marker


_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def polars_reads(node: Any) -> bool:
    """Whether Polars' Avro reader takes every type of the schema: it has no maps, does not
    resolve a reference to a named type, and panics on an enum inside a union."""
    if isinstance(node, str):
        return node in _PRIMITIVES
    if isinstance(node, list):
        return all(polars_reads(b) and not (isinstance(b, dict) and b.get("type") == "enum")
                   for b in node)
    kind = node.get("type")
    if kind in ("record", "error"):
        return all(polars_reads(f["type"]) for f in node["fields"])
    if kind == "array":
        return polars_reads(node["items"])
    if kind in ("enum", "fixed"):
        return True
    if kind == "map":
        return False
    return polars_reads(kind)


def bulk_schema(schema_json: Any, is_record: bool) -> Any:
    """The writer schema with the sentinel appended (a non-record value as a ``value``
    field of a record)."""
    fixed = {"type": "fixed", "name": "TidelogRowNumber", "size": 4}
    if is_record:
        fields = list(schema_json["fields"])
        if any(f["name"] == SENTINEL for f in fields):
            raise ValueError(f"the schema has a field named {SENTINEL}")
        return {**schema_json, "fields": [*fields, {"name": SENTINEL, "type": fixed}]}
    return {"type": "record", "name": "TidelogRow",
            "fields": [{"name": VALUE, "type": schema_json}, {"name": SENTINEL, "type": fixed}]}


def container_header(schema: Any) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), [], sync_marker=_SYNC)
    return out.getvalue()


def block(payloads: pa.BinaryArray) -> tuple[bytes, np.ndarray]:
    """The block (count, size, datums each followed by its sentinel, sync) and the
    sentinels as uint32 (big-endian row numbers)."""
    n = len(payloads)
    rows = np.arange(n, dtype=np.uint32)
    sentinels = pa.Array.from_buffers(pa.binary(), n, [
        None, pa.py_buffer((np.arange(n + 1, dtype=np.int32) * 4).tobytes()),
        pa.py_buffer(rows.astype(">u4").tobytes())])
    joined = pc.binary_join_element_wise(payloads, sentinels, pa.scalar(b"", pa.binary()))
    offsets = np.frombuffer(joined.buffers()[1], np.int32)[joined.offset: joined.offset + n + 1]
    raw = memoryview(joined.buffers()[2])[int(offsets[0]): int(offsets[-1])]
    return b"".join((encode_varint(n), encode_varint(len(raw)), raw, _SYNC)), rows


def decode(header: bytes, payloads: pa.Array, target: pa.StructType) -> pa.Array:
    """The payloads as a struct array of ``target``; raises when the block does not read
    back whole (the caller then decodes value by value)."""
    if payloads.null_count:
        raise ValueError("a null payload")
    payloads = payloads.cast(pa.binary())
    body, rows = block(payloads)
    try:
        table = pl.read_avro(io.BytesIO(header + body)).to_arrow()
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # Polars' Rust panics are BaseExceptions
        raise ValueError(f"Polars does not read the block: {exc}") from None
    if table.num_rows != len(payloads):
        raise ValueError("the block read back a different number of rows")
    marks = table.column(SENTINEL).combine_chunks().cast(pa.binary())
    got = np.frombuffer(marks.buffers()[2], np.uint8)[
        marks.offset * 4: (marks.offset + len(marks)) * 4]
    if marks.null_count or len(got) != 4 * len(rows) or not np.array_equal(
            got.view(">u4"), rows):
        raise ValueError("a value's length does not match its schema")
    columns = [c for c in table.column_names if c != SENTINEL]
    struct = pa.StructArray.from_arrays(
        [table.column(c).combine_chunks() for c in columns], names=columns)
    return struct.cast(target)
