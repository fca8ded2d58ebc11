"""Many JSON values of one schema decoded by the native core in one pass, straight into the
table's Arrow columns (``tidelog._native`` ``json_columns``). The pass is strict: it takes a
value only when ``json.loads`` would read it into exactly those typed values, and rejects the
others one by one (another JSON type in a column, a float in an integer column, NaN, a
duplicate key, ...). The rejected values are decoded by the reference (``json.loads``, value
by value), which takes them with its own rules or sends them to the DLQ with its reason, and
are put back in their rows. So the rows, and the DLQ's reasons, are the reference's.

Measured on the bench's Order values (100,000, CPU time): pyarrow's JSON reader with the
table's schema about 650-900 ns a value, DuckDB's ``json_transform_strict`` 400-500 (and it
refuses an object without every key; its lax twin turns a number into a string column's
text), msgspec or orjson and building the columns from Python objects 2,000-3,600; this
pass 240-300 as first written, and 0.5-0.8x of that since it reads a number in one scan
(Eisel-Lemire for 17 digits, not x87's long double), saves nothing per row for a rejected
one (its columns' counts say where to cut back), compares keys with the next field's name
in place, and hands its buffers to Arrow as they are (not copied into bytes): 200-330 ns
at a load average of 10-13 on two cores, where the first pass took 320-520 in the same
runs.

The buffers of a pass's columns (``(count, validity, values, offsets)`` a plan node) are
read-only buffer objects that own the pass's memory; the arrays built on them keep them."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
from pyiceberg.types import (
    BooleanType,
    DateType,
    DoubleType,
    IcebergType,
    ListType,
    LongType,
    StringType,
    StructType,
    TimestamptzType,
)

from .._native import core

ABSENT, INT64, DOUBLE, BOOL, STRING, LIST, STRUCT = range(7)

Plan = tuple[int, tuple[bytes, ...], tuple["Plan", ...]]
Reference = Callable[[pa.Array], tuple[pa.Array, dict[int, str]]]

def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t))


def _is_list(t: pa.DataType) -> bool:
    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


_SCALARS: list[tuple[type[IcebergType], Callable[[pa.DataType], bool], int]] = [
    (LongType, pa.types.is_int64, INT64), (DoubleType, pa.types.is_float64, DOUBLE),
    (BooleanType, pa.types.is_boolean, BOOL), (StringType, _is_text, STRING),
    (TimestamptzType, pa.types.is_timestamp, STRING), (DateType, pa.types.is_date32, STRING)]


class NoPlan(ValueError):
    """A column the native pass does not build (the caller decodes another way)."""


def available() -> bool:
    return core is not None


MAX_FIELDS = 64  # of a struct, and columns in all: the native pass's limits
MAX_NODES = 1024


def plan(arrow: pa.DataType, iceberg: IcebergType) -> Plan:
    """The pass's plan for a column of ``arrow`` type (the table's) holding the schema's
    ``iceberg`` type: timestamps and dates are read as strings (cast after)."""
    out = _plan(arrow, iceberg)
    if _nodes(out) > MAX_NODES:
        raise NoPlan(f"more than {MAX_NODES} JSON columns")
    return out


def _nodes(node: Plan) -> int:
    return 1 + sum(_nodes(child) for child in node[2])


def _plan(arrow: pa.DataType, iceberg: IcebergType) -> Plan:
    if isinstance(iceberg, StructType) and pa.types.is_struct(arrow):
        if arrow.num_fields > MAX_FIELDS:
            raise NoPlan(f"a JSON object of more than {MAX_FIELDS} columns")
        mine = {f.name: f.field_type for f in iceberg.fields}
        children = tuple(_plan(f.type, mine[f.name]) if f.name in mine else (ABSENT, (), ())
                         for f in arrow)
        return STRUCT, tuple(f.name.encode() for f in arrow), children
    if isinstance(iceberg, ListType) and _is_list(arrow):
        return LIST, (), (_plan(arrow.value_type, iceberg.element_type),)
    for kind, is_arrow, code in _SCALARS:
        if isinstance(iceberg, kind) and is_arrow(arrow):
            return code, (), ()
    raise NoPlan(f"no native JSON column for {iceberg} as {arrow}")


def _bits(valid: bytes) -> pa.Buffer:
    return pa.py_buffer(np.packbits(np.frombuffer(valid, np.uint8), bitorder="little"))


def _array(arrow: pa.DataType, node: Plan, cols: list[tuple[int, bytes, bytes, bytes]],
           at: list[int]) -> pa.Array:
    """The Arrow array of ``node`` (its buffers ``cols[at[0]]``, children after it)."""
    n, valid, vals, offs = cols[at[0]]
    at[0] += 1
    kind = node[0]
    if kind == ABSENT:
        return pa.nulls(n, arrow)
    if kind == STRUCT:
        children = [_array(f.type, child, cols, at) for f, child in
                    zip(arrow, node[2], strict=True)]
        return pa.StructArray.from_buffers(arrow, n, [_bits(valid)], children=children)
    if kind == LIST:  # the pass's offsets are 64-bit: a large_list's, cast when not
        child = _array(arrow.value_type, node[2][0], cols, at)
        items = pa.large_list(arrow.value_field)
        out = pa.LargeListArray.from_buffers(items, n, [_bits(valid), pa.py_buffer(offs)],
                                             children=[child])
        return out if items == arrow else out.cast(arrow)
    if kind == STRING:
        text = pa.Array.from_buffers(pa.large_string(), n, [
            _bits(valid), pa.py_buffer(offs), pa.py_buffer(vals)])
        return text if pa.types.is_large_string(arrow) else text.cast(arrow)
    if kind == BOOL:
        return pa.Array.from_buffers(arrow, n, [_bits(valid), _bits(vals)])
    return pa.Array.from_buffers(arrow, n, [_bits(valid), pa.py_buffer(vals)])


def decode(payloads: pa.Array, target: pa.StructType, schema: StructType, skip: int,
           reference: Reference) -> tuple[pa.Array, dict[int, str]]:
    """``payloads`` (none null; ``skip`` framing bytes each) as a struct array of ``target``
    and the reasons of the rows with none, the values the pass rejects decoded by
    ``reference`` (the record-by-record decode_column)."""
    assert core is not None
    node = plan(target, schema)
    values = payloads.cast(pa.binary())
    offsets = np.frombuffer(values.buffers()[1], np.int32)[
        values.offset: values.offset + len(values) + 1]
    cols, rejected = core.json_columns(values.buffers()[2] or b"", offsets, skip, node)
    struct = _array(target, node, cols, [0])
    if not rejected:
        return struct, {}
    again, bad = reference(values.take(pa.array(rejected, pa.int64())))
    n = len(struct)
    order = np.arange(n, dtype=np.int64)
    order[rejected] = n + np.arange(len(rejected))
    merged = pa.concat_arrays([struct, again.cast(target)]).take(pa.array(order))
    return merged, {rejected[i]: reason for i, reason in bad.items()}
