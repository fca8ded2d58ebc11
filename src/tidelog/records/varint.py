"""Zig-zag varints (protobuf sint32/sint64), as used inside v2 records."""

from __future__ import annotations

from .errors import InvalidRecordError


def encode_varint(value: int) -> bytes:
    """Zig-zag encode ``value`` (sint64 range) to base-128 little-endian groups."""
    v = (value << 1) ^ (value >> 63)
    v &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def write_varint(out: bytearray, value: int) -> None:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def varint_size(value: int) -> int:
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


def decode_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Return (value, new position). Raises InvalidRecordError on underflow or > 10 bytes."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise InvalidRecordError("varint underflow")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise InvalidRecordError("varint longer than 10 bytes")
    return (result >> 1) ^ -(result & 1), pos
