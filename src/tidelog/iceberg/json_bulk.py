"""Many JSON values of one schema decoded in one call: pyarrow's JSON reader over the
values as newline-delimited JSON (a newline inside a value can only be whitespace between
its tokens, so it becomes a space), date and date-time strings read as strings and cast to
their columns after. The reader must give back exactly one row per value; otherwise the
caller decodes the values one by one (json.loads, the reference), which finds the bad ones."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj


def read_type(t: pa.DataType) -> pa.DataType:
    """``t`` with its timestamps and dates as strings (what the JSON holds)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, read_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(read_type(t.value_type))
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return pa.string()
    return t


def decode(payloads: pa.Array, target: pa.StructType) -> pa.Array:
    """The JSON objects ``payloads`` as a struct array of ``target``; raises when they do
    not read back one row per value."""
    n = len(payloads)
    if payloads.null_count:
        raise ValueError("a null payload")
    flat = pc.replace_substring(pc.replace_substring(payloads.cast(pa.binary()), b"\n", b" "),
                                b"\r", b" ")
    newlines = pa.Array.from_buffers(pa.binary(), n, [
        None, pa.py_buffer(np.arange(n + 1, dtype=np.int32).tobytes()),
        pa.py_buffer(b"\n" * n)])
    lines = pc.binary_join_element_wise(flat, newlines, pa.scalar(b"", pa.binary()))
    offsets = np.frombuffer(lines.buffers()[1], np.int32)[lines.offset: lines.offset + n + 1]
    text = memoryview(lines.buffers()[2])[int(offsets[0]): int(offsets[-1])]
    wanted = read_type(target)
    table = pj.read_json(io.BytesIO(text), parse_options=pj.ParseOptions(
        explicit_schema=pa.schema(list(wanted)), unexpected_field_behavior="ignore",
        newlines_in_values=False)).combine_chunks()
    if table.num_rows != n:
        raise ValueError(f"{table.num_rows} rows read from {n} values")
    columns = [table.column(f.name) for f in wanted]
    struct = pa.StructArray.from_arrays(
        [c.chunk(0) if c.num_chunks else pa.array([], f.type) for c, f in
         zip(columns, wanted, strict=True)], fields=list(wanted))
    return struct.cast(target)
