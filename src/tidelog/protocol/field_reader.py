"""Bounds-checked reads of Kafka's primitive field types from one buffer.

Two hand-written decoders need them: Produce requests decoded in place (protocol/
produce_in_place.py: kio would copy the records) and ``__consumer_offsets`` keys and values
(server/coordinator/group/records.py: Kafka's own record schemas, not wire requests, so kio has no class
for them). Classic fields use fixed-width lengths, flexible ones (KIP-482) unsigned varints
of length + 1; either way a length that runs past the buffer raises the subclass's ``error``
naming the byte, never a struct.error or a short slice.
"""

from __future__ import annotations

import struct

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class FieldReader:
    error: type[Exception] = ValueError

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0,
                 flexible: bool = False) -> None:
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos = pos
        self.flexible = flexible

    def take(self, n: int) -> memoryview:
        """The next ``n`` bytes, as a view of the buffer."""
        if n < 0 or self.pos + n > len(self.buf):
            raise self.error(
                f"field of {n} bytes at byte {self.pos} runs past the end ({len(self.buf)})"
            )
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return int(_I8.unpack(self.take(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:  # Kafka's ByteUtils.readUnsignedVarint: five bytes at most
                raise self.error(f"varint too long at byte {self.pos}")

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        return None if n < 0 else bytes(self.take(n)).decode("utf-8")

    def nullable_bytes(self) -> memoryview | None:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        return None if n < 0 else self.take(n)

    def array_len(self) -> int:
        """An array's length; -1 for a null array."""
        return self.uvarint() - 1 if self.flexible else self.i32()

    def skip_tags(self) -> None:
        """Skip a flexible structure's tagged fields (none is meaningful to these readers)."""
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())
