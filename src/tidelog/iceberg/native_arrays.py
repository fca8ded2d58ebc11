"""Arrow arrays from the buffers a native column pass returns (``tidelog._native``
``avro_columns`` and ``proto_columns``): one ``(count, validity bytes, values, offsets)``
per node of the pass's plan, in preorder. The three buffers are the pass's own memory
handed over as it is (read-only buffer objects that free it with their last reader, not
bytes copied from it): Arrow reads them in place. The plans' kind numbers differ per pass;
each names its own in a :class:`Kinds`."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, cast

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

Columns = list[tuple[int, "ReadableBuffer", "ReadableBuffer", "ReadableBuffer"]]
Node = tuple[object, ...]  # a plan's node: its kind at 0, its children (nodes) at 4


class Kinds(NamedTuple):
    """A plan's kind numbers that decide an array's shape (any other: fixed-width values)."""
    absent: int
    struct: int
    list: int
    boolean: int
    blobs: frozenset[int]  # offsets and bytes: string, bytes, an enum's names


def bits(valid: ReadableBuffer) -> pa.Buffer:
    """One byte per slot (0 or 1) as Arrow's bitmap."""
    return pa.py_buffer(np.packbits(np.frombuffer(memoryview(valid), np.uint8), bitorder="little"))


def column_array(arrow: pa.DataType, node: Node, cols: Columns, at: list[int],
                 kinds: Kinds) -> pa.Array:
    """The Arrow array of a plan's ``node`` (its kind at 0, its children at 4; its buffers
    ``cols[at[0]]``, its children's after it)."""
    n, valid, vals, offs = cols[at[0]]
    at[0] += 1
    kind = cast(int, node[0])
    children = cast("tuple[Node, ...]", node[4])
    if kind == kinds.absent:
        return pa.nulls(n, arrow)
    if kind == kinds.struct:
        fields = [column_array(f.type, child, cols, at, kinds) for f, child in
                  zip(arrow, children, strict=True)]
        return pa.StructArray.from_buffers(arrow, n, [bits(valid)], children=fields)
    if kind == kinds.list:
        child = column_array(arrow.value_type, children[0], cols, at, kinds)
        return pa.Array.from_buffers(arrow, n, [bits(valid), pa.py_buffer(offs)],
                                     children=[child])
    if kind in kinds.blobs:
        return pa.Array.from_buffers(arrow, n, [bits(valid), pa.py_buffer(offs),
                                                pa.py_buffer(vals)])
    if kind == kinds.boolean:
        return pa.Array.from_buffers(arrow, n, [bits(valid), bits(vals)])
    return pa.Array.from_buffers(arrow, n, [bits(valid), pa.py_buffer(vals)])
