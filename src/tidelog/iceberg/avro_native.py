"""Many Avro values of one writer schema decoded by the native core in one pass, straight into
the table's Arrow columns (``tidelog._native`` ``avro_columns``). The pass is strict: it takes
a value only when fastavro's schemaless reader (the reference, value by value) would read it
into exactly those typed values with no byte left, and rejects the others one by one (an int
past 32 bits, a boolean byte other than 0 and 1, a float NaN, bad UTF-8, a negative array
block count, an index out of range, bytes left over, a value cut short...). The rejected
values are decoded by the reference, which takes them with its own rules or sends them to
the DLQ with its reason, and are put back in their rows. So the rows, and the DLQ's
reasons, are the reference's.

The schema types it reads: boolean, int, long, float, double, string, bytes, enum, fixed,
array, record and a union of null and one of these (named types and references to them);
a schema with any other (a map, a logical type) has no plan: Polars' Avro reader
(avro_bulk) decodes it. Measured by bench/iceberg_values.py on the bench's Order values
(100,000, CPU time, the paths in turn): Polars' reader about 2.5x this pass's cost. The
pass hands its column buffers to Arrow as they are (not copied into bytes): decode_column
140-200 ns a value at a load average of 4-5 on two cores, 200-260 with the copies, in turn
in the same sitting."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from .._native import core
from .native_arrays import Kinds, column_array

(ABSENT, BOOL, INT32, INT64, FLOAT, DOUBLE, STRING, BYTES, ENUM, FIXED, LIST,
 STRUCT) = range(12)
MAX_NODES = 1024
_KINDS = Kinds(ABSENT, STRUCT, LIST, BOOL, frozenset((STRING, BYTES, ENUM)))

# (kind, null branch, value branch (-1: not a union), large offsets, children, the child of
# each writer field in the datum's order, extra: an enum's symbols or a fixed's size)
Plan = tuple[int, int, int, int, tuple["Plan", ...], tuple[int, ...], tuple[Any, ...]]
Reference = Callable[[pa.Array], tuple[pa.Array, dict[int, str]]]

_PRIMITIVES: dict[str, tuple[int, Callable[[pa.DataType], bool]]] = {
    "boolean": (BOOL, pa.types.is_boolean), "int": (INT32, pa.types.is_int32),
    "long": (INT64, pa.types.is_int64), "float": (FLOAT, pa.types.is_float32),
    "double": (DOUBLE, pa.types.is_float64),
    "string": (STRING, lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
    "bytes": (BYTES, lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)),
}
_LARGE = (pa.types.is_large_string, pa.types.is_large_binary, pa.types.is_large_list)


class NoPlan(ValueError):
    """A schema the native pass does not read (the caller decodes another way)."""


def available() -> bool:
    return core is not None


def plan(schema: Any, target: pa.StructType, is_record: bool) -> Plan:
    """The pass's plan for values of the writer ``schema`` into ``target`` (the table's
    value columns; a schema that is not a record: its ``value`` column)."""
    builder = _Builder()
    if is_record:
        out = builder.node(schema, target, None)
    else:
        field = target.field(0) if target.num_fields == 1 else None
        if field is None:
            raise NoPlan("a value column and nothing else")
        out = (STRUCT, -1, -1, 0, (builder.node(schema, field.type, None),), (0,), ())
    if builder.count > MAX_NODES:
        raise NoPlan(f"more than {MAX_NODES} Avro columns")
    return out


class _Builder:
    def __init__(self) -> None:
        self.named: dict[str, Mapping[str, Any]] = {}
        self.count = 0

    def node(self, node: Any, arrow: pa.DataType, space: str | None) -> Plan:
        self.count += 1
        if isinstance(node, list):
            others = [i for i, b in enumerate(node) if b != "null"]
            nulls = [i for i, b in enumerate(node) if b == "null"]
            if len(others) != 1 or len(nulls) > 1:
                raise NoPlan("a union of more than null and one type")
            inner = self.node(node[others[0]], arrow, space)
            if inner[2] >= 0:
                raise NoPlan("a union in a union")
            return (inner[0], nulls[0] if nulls else -1, others[0], *inner[3:])
        if isinstance(node, str):
            return self._named(node, arrow, space)
        if node.get("logicalType") is not None:
            raise NoPlan(f"the logical type {node['logicalType']}")
        kind = node.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            space = self._remember(node, space)
        if kind in ("record", "error") and pa.types.is_struct(arrow):
            return self._record(node, arrow, space)
        large = int(any(is_large(arrow) for is_large in _LARGE))
        if kind == "enum" and (pa.types.is_string(arrow) or pa.types.is_large_string(arrow)):
            return (ENUM, -1, -1, large, (), (), tuple(s.encode() for s in node["symbols"]))
        if kind == "fixed" and pa.types.is_fixed_size_binary(arrow) and (
                arrow.byte_width == int(node["size"])):
            return (FIXED, -1, -1, 0, (), (), (int(node["size"]),))
        if kind == "array" and (pa.types.is_list(arrow) or pa.types.is_large_list(arrow)):
            item = self.node(node["items"], arrow.value_type, space)
            return (LIST, -1, -1, large, (item,), (), ())
        if isinstance(kind, (str, list, dict)) and kind not in ("record", "error", "enum",
                                                                 "fixed", "array", "map"):
            self.count -= 1
            return self.node(kind, arrow, space)
        raise NoPlan(f"no native Avro column for {kind} as {arrow}")

    def _named(self, name: str, arrow: pa.DataType, space: str | None) -> Plan:
        if name in _PRIMITIVES:
            kind, is_arrow = _PRIMITIVES[name]
            if not is_arrow(arrow):
                raise NoPlan(f"no native Avro column for {name} as {arrow}")
            return (kind, -1, -1, int(any(f(arrow) for f in _LARGE)), (), (), ())
        full = name if "." in name or not space else f"{space}.{name}"
        for candidate in (full, name):
            if candidate in self.named:
                found = self.named[candidate]
                return self.node({k: v for k, v in found.items() if k != "name"} | {
                    "name": candidate}, arrow, None)
        raise NoPlan(f"unknown Avro type {name!r}")

    def _remember(self, node: Mapping[str, Any], space: str | None) -> str | None:
        name = str(node["name"])
        if "." in name:
            full, ns = name, name.rsplit(".", 1)[0]
        else:
            ns = node.get("namespace", space)
            full = f"{ns}.{name}" if ns else name
        self.named[full] = node
        return ns

    def _record(self, node: Mapping[str, Any], arrow: pa.StructType, space: str | None
                ) -> Plan:
        index = {arrow.field(i).name: i for i in range(arrow.num_fields)}
        by_name = {f["name"]: f for f in node["fields"]}
        if len(by_name) != len(node["fields"]) or not set(by_name) <= set(index):
            raise NoPlan("a record field the table lacks")
        children: list[Plan] = []
        for i in range(arrow.num_fields):
            f = by_name.get(arrow.field(i).name)
            if f is None:
                self.count += 1
                children.append((ABSENT, -1, -1, 0, (), (), ()))
            else:
                children.append(self.node(f["type"], arrow.field(i).type, space))
        order = tuple(index[f["name"]] for f in node["fields"])
        return (STRUCT, -1, -1, 0, tuple(children), order, ())


def decode(payloads: pa.Array, target: pa.StructType, node: Plan, skip: int,
           reference: Reference) -> tuple[pa.Array, dict[int, str]]:
    """``payloads`` (none null; ``skip`` framing bytes each) as a struct array of ``target``
    and the reasons of the rows with none, the values the pass rejects decoded by
    ``reference`` (the record-by-record decode_column)."""
    assert core is not None
    values = payloads.cast(pa.binary())
    offsets = np.frombuffer(values.buffers()[1], np.int32)[
        values.offset: values.offset + len(values) + 1]
    cols, rejected = core.avro_columns(values.buffers()[2] or b"", offsets, skip, node)
    struct = column_array(target, node, cols, [0], _KINDS)
    if not rejected:
        return struct, {}
    again, bad = reference(values.take(pa.array(rejected, pa.int64())))
    n = len(struct)
    order = np.arange(n, dtype=np.int64)
    order[rejected] = n + np.arange(len(rejected))
    merged = pa.concat_arrays([struct, again.cast(target)]).take(pa.array(order))
    return merged, {rejected[i]: reason for i, reason in bad.items()}
