"""Many JSON values of one schema decoded in one call: pyarrow's JSON reader over the
values as newline-delimited JSON (a newline inside a value can only be whitespace between
its tokens, so it becomes a space), date and date-time strings read as strings and cast to
their columns after. The reader runs in the calling thread over one block (its thread pool
spent about twice the CPU time on a loaded machine, and its blocks had to be joined after).
The reader must give back exactly one row per value; otherwise the
caller decodes the values one by one (json.loads, the reference), which finds the bad ones."""

from __future__ import annotations

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


def _lines(values: pa.BinaryArray, skip: int = 0) -> pa.Buffer:
    """The values, less their first ``skip`` bytes (Confluent's framing), as
    newline-delimited text: each followed by a newline, the newlines and carriage returns
    inside them (whitespace between tokens) made spaces; numpy over the values' data buffer.
    With framing, the text is made in place of it (one copy): each value's first framing
    byte becomes the newline that ends the value before it and the others spaces (blanks
    before a JSON text)."""
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32)[
        values.offset: values.offset + n + 1].astype(np.int64)
    data = np.frombuffer(values.buffers()[2] or b"", np.uint8)[offsets[0]: offsets[-1]]
    breaks = (data == ord("\n")) | (data == ord("\r"))
    if not skip:
        if breaks.any():
            data = np.where(breaks, np.uint8(ord(" ")), data)
        return pa.py_buffer(np.insert(data, offsets[1:] - offsets[0], np.uint8(ord("\n"))))
    if n and int(np.diff(offsets).min()) < skip:
        raise ValueError("a value shorter than its framing")
    text = np.empty(len(data) + 1, np.uint8)
    text[:-1] = np.where(breaks, np.uint8(ord(" ")), data) if breaks.any() else data
    starts = offsets[:-1] - offsets[0]
    text[starts] = ord("\n")
    text[(starts[:, None] + np.arange(1, skip)).ravel()] = ord(" ")
    text[-1] = ord("\n")
    return pa.py_buffer(text[1:])


def plain_objects(payloads: pa.Array, skip: int = 0) -> bool:
    """Whether each value's text starts with ``{`` (right after its ``skip`` framing bytes),
    as serializers write objects: only those go to the reader (pyarrow 26's reader crashes
    the process on a first line of ``null``; leading blanks and other texts are the value by
    value decode's)."""
    values = payloads.cast(pa.binary())
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32)[
        values.offset: values.offset + n + 1].astype(np.int64)
    if not n or int(np.diff(offsets).min()) <= skip:
        return False
    data = np.frombuffer(values.buffers()[2] or b"", np.uint8)
    return bool((data[offsets[:-1] + skip] == ord("{")).all())


def decode(payloads: pa.Array, target: pa.StructType, skip: int = 0) -> pa.Array:
    """The JSON objects ``payloads`` (after ``skip`` framing bytes each) as a struct array
    of ``target``; raises when they do not read back one row per value."""
    n = len(payloads)
    if payloads.null_count:
        raise ValueError("a null payload")
    text = _lines(payloads.cast(pa.binary()), skip)
    pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, text.size], np.int32)),
                                           text]).validate(full=True)  # json.loads' UTF-8
    wanted = read_type(target)
    table = pj.read_json(pa.BufferReader(text), read_options=pj.ReadOptions(
        use_threads=False, block_size=max(1 << 20, text.size + 1)), parse_options=pj.ParseOptions(
        explicit_schema=pa.schema(list(wanted)), unexpected_field_behavior="ignore",
        newlines_in_values=False)).combine_chunks()
    if table.num_rows != n:
        raise ValueError(f"{table.num_rows} rows read from {n} values")
    columns = [table.column(f.name) for f in wanted]
    struct = pa.StructArray.from_arrays(
        [c.chunk(0) if c.num_chunks else pa.array([], f.type) for c, f in
         zip(columns, wanted, strict=True)], fields=list(wanted))
    if _infinite(struct):  # an integer past a double's range: float() refuses it
        raise ValueError("an infinite number")
    return struct.cast(target)


def _infinite(a: pa.Array) -> bool:
    t = a.type
    if pa.types.is_struct(t):
        return any(_infinite(a.field(i)) for i in range(t.num_fields))
    if pa.types.is_list(t):
        return _infinite(a.flatten())
    if pa.types.is_floating(t):
        return bool(pc.any(pc.is_inf(a)).as_py())
    return False
