"""Many Avro values of one writer schema decoded in one call: the payloads are laid end to
end as one block of an Avro object container (the format's own framing: a header with the
schema, then a block of N datums) and Polars' native Avro reader decodes the block into
Arrow columns. fastavro's schemaless reader, one value at a time, is the reference and the
fallback.

Datums in a block have no boundaries of their own, so a value with trailing bytes or one cut
short would shift every value after it. Each datum is therefore followed by a 5-byte
sentinel (a zero byte and its row number, an Avro ``fixed`` field appended to the record):
the block is taken only if every row reads back its own number and the types cast to the
table's columns; otherwise the caller decodes the values one by one, which finds the bad
ones. The sentinel is as long as Confluent's framing (magic byte and schema id), so the
block of framed values is made in one copy of them: each value's framing becomes the
sentinel of the value before it."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import numpy as np
import polars as pl
import pyarrow as pa

from tidelog.records.varint import encode_varint  # an Avro long is a zig-zag varint

from .columns import VALUE
from .value_codec import strip_prefix

SENTINEL = "__tidelog_row"
_SYNC = b"tidelog-iceberg!"  # the container's 16-byte sync marker
MARK = 5  # bytes of a sentinel: a zero byte, then the row number (big-endian uint32)


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
    fixed = {"type": "fixed", "name": "TidelogRowNumber", "size": MARK}
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


def _marks(n: int) -> np.ndarray:
    """The sentinels of rows 0..n-1, as an (n, MARK) uint8 array."""
    out = np.zeros((n, MARK), np.uint8)
    out[:, 1:] = np.arange(n, dtype=">u4").view(np.uint8).reshape(n, 4)
    return out


def block(payloads: pa.BinaryArray, skip: int = 0) -> bytes:
    """The block: count, size, the datums (each payload less its first ``skip`` bytes:
    0, or MARK for framed values) each followed by its sentinel, sync."""
    n = len(payloads)
    offsets = np.frombuffer(payloads.buffers()[1], np.int32)[
        payloads.offset: payloads.offset + n + 1].astype(np.int64)
    data = np.frombuffer(payloads.buffers()[2] or b"", np.uint8)[offsets[0]: offsets[-1]]
    starts = offsets[:-1] - offsets[0]
    marks = _marks(n)
    if skip == MARK:  # the framing of value i + 1 is the place of value i's sentinel
        if n and int(np.diff(offsets).min()) < skip:
            raise ValueError("a value shorter than its framing")
        raw = np.empty(len(data) + MARK, np.uint8)
        raw[:len(data)] = data
        raw[(starts[1:, None] + np.arange(MARK)).ravel()] = marks[:-1].ravel()
        raw[len(data):] = marks[-1] if n else []
        raw = raw[MARK:] if n else raw[:0]
    else:
        assert skip == 0
        ends = offsets[1:] - offsets[0]
        lengths = ends - starts
        raw = np.empty(len(data) + MARK * n, np.uint8)
        at = starts + MARK * np.arange(n)  # where each datum lands
        keep = np.repeat(at - starts, lengths)
        raw[np.arange(len(data)) + keep] = data
        raw[((at + lengths)[:, None] + np.arange(MARK)).ravel()] = marks.ravel()
    return b"".join((encode_varint(n), encode_varint(len(raw)), raw.tobytes(), _SYNC))


def decode(header: bytes, payloads: pa.Array, target: pa.StructType, skip: int = 0
           ) -> pa.Array:
    """The payloads (after ``skip`` framing bytes each) as a struct array of ``target``;
    raises when the block does not read back whole (the caller then decodes value by
    value)."""
    if payloads.null_count:
        raise ValueError("a null payload")
    payloads = payloads.cast(pa.binary())
    if skip not in (0, MARK):
        payloads, skip = strip_prefix(payloads, skip), 0
    body = block(payloads, skip)
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
        marks.offset * MARK: (marks.offset + len(marks)) * MARK]
    if marks.null_count or not np.array_equal(got, _marks(len(payloads)).ravel()):
        raise ValueError("a value's length does not match its schema")
    columns = [c for c in table.column_names if c != SENTINEL]
    struct = pa.StructArray.from_arrays(
        [table.column(c).combine_chunks() for c in columns], names=columns)
    return struct.cast(target)
