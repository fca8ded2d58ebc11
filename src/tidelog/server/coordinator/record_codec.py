"""The coordinators' record schemas' primitives (Kafka's generated ``*Key``/``*Value``
serdes of coordinator-common): fixed-width and flexible (compact, tagged) fields, the
schema error, and Java's hashing that places a key on its internal topic's partition.
Shared by the group, share and transaction coordinators' records."""

from __future__ import annotations

import base64
import struct
import uuid

from tidelog.protocol.field_reader import FieldReader

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


class RecordWriter:
    def __init__(self, flexible: bool = False) -> None:
        self.buf = bytearray()
        self.flexible = flexible

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.i16(-1)
            return
        data = s.encode("utf-8")
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            self.i16(len(data))
        self.buf += data

    def bytes_(self, b: bytes) -> None:
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.i32(len(b))
        self.buf += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.i32(n)

    def tags(self) -> None:
        if self.flexible:
            self.uvarint(0)


class SchemaError(ValueError):
    """A key or value that does not parse as any known schema version."""


class RecordReader(FieldReader):
    error = SchemaError

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise SchemaError("null in a non-nullable string")
        return s

    def bytes_(self) -> bytes:
        b = self.nullable_bytes()
        return b"" if b is None else bytes(b)

    def array_len(self) -> int:
        return max(super().array_len(), 0)
