"""What turns a record's value into the table's value columns: one codec per schema (Avro,
JSON Schema, Protobuf), each giving the Iceberg fields of its schema and decoding payloads
(values with Confluent's framing, or after it) into rows of those columns: one at a time
(``decode``, the reference) or a column at once (``decode_column``)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
from pyiceberg.types import NestedField

from .._native import core


class UnsupportedSchema(ValueError):
    """A schema the table cannot take (e.g. an Avro union of two non-null types)."""


class ValueCodec(ABC):
    #: the value's columns (a schema that is not a record/object/message: one ``value`` column)
    fields: list[NestedField]

    @abstractmethod
    def decode(self, payload: bytes) -> Mapping[str, object]:
        """The value's columns of one record; raises on bytes that do not parse."""

    def decode_column(self, payloads: pa.Array, target: pa.StructType, skip: int = 0
                      ) -> tuple[pa.Array, dict[int, str]]:
        """The values of many records at once, as a struct array of ``target`` (the table's
        value columns), and the reason of each row that has none (index -> reason; its
        slot is null). ``skip``: framing bytes before each payload (Confluent's magic byte
        and schema id), dropped by the decode's own pass over the values. This default
        decodes record by record; a codec whose library decodes in bulk overrides it and
        falls back here."""
        rows: list[Mapping[str, object] | None] = []
        bad: dict[int, str] = {}
        for i, payload in enumerate(payloads.to_pylist()):
            try:
                rows.append(self.decode(payload[skip:]))
            except Exception as exc:
                bad[i] = f"value does not parse: {exc}"
                rows.append(None)
        return rows_to_struct(rows, target, bad), bad


def zigzag_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """One zig-zag varint (Confluent's Protobuf message-index framing): (value, next pos)."""
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (result >> 1) ^ -(result & 1), pos


def rows_to_struct(rows: list[Mapping[str, object] | None], target: pa.StructType,
                   bad: dict[int, str]) -> pa.Array:
    """Rows as a struct array of ``target`` (columns a row lacks are null). A row pyarrow
    refuses (a value out of its column's range) is null, with its reason in ``bad``."""
    try:
        return pa.array(rows, target)
    except _REFUSED:
        pass
    out: list[Mapping[str, object] | None] = []
    for i, row in enumerate(rows):
        try:
            pa.array([row], target)
            out.append(row)
        except _REFUSED as exc:
            bad[i] = f"value does not fit the table's columns: {exc}"
            out.append(None)
    return pa.array(out, target)


_REFUSED = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError)


def strip_prefix(values: pa.Array, skip: int) -> pa.Array:
    """``values`` (none null, each at least ``skip`` bytes) without their first ``skip``
    bytes (Confluent's framing): the native core's copy of each value's rest, else
    ``strip_prefix_py``."""
    if core is None:
        return strip_prefix_py(values, skip)
    values = values.cast(pa.binary())
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset: values.offset + n + 1]
    data, new = core.strip_prefix(values.buffers()[2] or b"", offsets, skip)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(new), pa.py_buffer(data)])


def strip_prefix_py(values: pa.Array, skip: int) -> pa.Array:
    """``strip_prefix``'s twin: one gather over the data buffer."""
    values = values.cast(pa.binary())
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32)[
        values.offset: values.offset + n + 1].astype(np.int64)
    data = np.frombuffer(values.buffers()[2] or b"", np.uint8)[offsets[0]: offsets[-1]]
    offsets -= offsets[0]
    keep = np.ones(len(data), dtype=bool)
    keep[(offsets[:-1, None] + np.arange(skip)).ravel()] = False
    new = (offsets - skip * np.arange(n + 1)).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(new),
                                                  pa.py_buffer(data[keep].tobytes())])
