"""What turns a record's value into the table's value columns: one codec per schema (Avro,
JSON Schema, Protobuf), each giving the Iceberg fields of its schema and decoding a payload
(the value with Confluent's framing already removed) into a row of those columns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

from pyiceberg.types import NestedField


class UnsupportedSchema(ValueError):
    """A schema the table cannot take (e.g. an Avro union of two non-null types)."""


class ValueCodec(ABC):
    #: the value's columns (a schema that is not a record/object/message: one ``value`` column)
    fields: list[NestedField]

    @abstractmethod
    def decode(self, payload: bytes) -> Mapping[str, object]:
        """The value's columns of one record; raises on bytes that do not parse."""


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
