"""Bounds check of a request body before kio's native reader sees it.

kio 0.6.5's Rust reader sizes its buffers from the lengths and array counts written in the
frame, before reading the elements: a 40-byte frame that claims an array of 2^31 elements
makes it allocate hundreds of GB and the process aborts (found by
tests/protocol/test_codec.py's fuzz test). One remote client could kill the broker, so every
body is first walked against its schema here: each string/bytes length, array count and
tagged-field size must fit in the bytes that remain. The walk allocates nothing; the
per-class walker is compiled once from kio's dataclass metadata (cached).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

Step = Callable[[bytes, int, int], int]  # (buf, pos, end) -> new pos

_FIXED = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class FrameBoundsError(ValueError):
    """A length or count in the frame points past its end."""


def _need(pos: int, n: int, end: int, what: str) -> int:
    if n < 0 or pos + n > end:
        raise FrameBoundsError(f"{what} of {n} bytes at byte {pos} overruns the frame ({end})")
    return pos + n


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise FrameBoundsError(f"truncated varint at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise FrameBoundsError(f"varint too long at byte {pos}")


def _length(buf: bytes, pos: int, end: int, flexible: bool, wide: bool) -> tuple[int, int]:
    """(length or -1 for null, position after the length field)."""
    if flexible:
        n, pos = _uvarint(buf, pos, end)
        return n - 1, pos
    size = 4 if wide else 2
    _need(pos, size, end, "length field")
    n = (_I32 if wide else _I16).unpack_from(buf, pos)[0]
    return n, pos + size


def _primitive(kafka_type: str, flexible: bool) -> Step:
    fixed = _FIXED.get(kafka_type)
    if fixed is not None:
        return lambda buf, pos, end: _need(pos, fixed, end, kafka_type)
    if kafka_type not in ("string", "bytes", "records"):
        raise NotImplementedError(kafka_type)
    wide = kafka_type != "string"

    def step(buf: bytes, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, flexible, wide)
        return pos if n < 0 else _need(pos, n, end, kafka_type)

    return step


def _array(element: Step, flexible: bool, min_size: int, fixed: int | None = None) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        n, pos = _length(buf, pos, end, flexible, True)
        if n < 0:
            return pos
        if fixed is not None:  # elements of constant size: no need to visit each
            return _need(pos, n * fixed, end, "array")
        _need(pos, n * min_size, end, "array")
        for _ in range(n):
            pos = element(buf, pos, end)
        return pos

    return step


def _nullable_struct(inner: Step) -> Step:
    def step(buf: bytes, pos: int, end: int) -> int:
        _need(pos, 1, end, "nullable struct marker")
        return pos + 1 if buf[pos] == 0xFF else inner(buf, pos + 1, end)

    return step


def _fixed_size(f: Any, flexible: bool, tagged: bool) -> int | None:
    """Bytes a field always takes, or None if variable."""
    optional = False if tagged else is_optional(f)
    match classify_field(f):
        case PrimitiveField():
            return _FIXED.get(get_schema_field_type(f))
        case EntityField(t):
            return None if optional else struct_size(t)
    return None


def _field_step(f: Any, flexible: bool, tagged: bool) -> Step:
    optional = False if tagged else is_optional(f)
    match classify_field(f):
        case PrimitiveField():
            return _primitive(get_schema_field_type(f), flexible)
        case PrimitiveTupleField():
            kt = get_schema_field_type(f)
            return _array(_primitive(kt, flexible), flexible, _FIXED.get(kt, 1), _FIXED.get(kt))
        case EntityField(t):
            inner = struct_step(t)
            return _nullable_struct(inner) if optional else inner
        case EntityTupleField(t):
            return _array(struct_step(t), flexible, 1, struct_size(t))
    raise NotImplementedError(f.name)


@functools.cache
def struct_size(cls: Any) -> int | None:
    """The constant size of a struct made only of fixed-size fields (non-flexible only)."""
    if cls.__flexible__:
        return None
    total = 0
    for f in fields(cls):
        size = _fixed_size(f, False, False)
        if size is None:
            return None
        total += size
    return total


def _fixed(size: int) -> Step:
    return lambda buf, pos, end: _need(pos, size, end, "fields")


def _compile(cls: Any, flexible: bool) -> tuple[list[Step], dict[int, Step]]:
    """Steps for the untagged fields, consecutive fixed-size fields merged into one."""
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    run = 0
    for f in fields(cls):
        tag = get_field_tag(f)
        if tag is not None:
            tagged[int(tag)] = _field_step(f, flexible, True)
            continue
        size = _fixed_size(f, flexible, False)
        if size is not None:
            run += size
            continue
        if run:
            steps.append(_fixed(run))
            run = 0
        steps.append(_field_step(f, flexible, False))
    if run:
        steps.append(_fixed(run))
    return steps, tagged


@functools.cache
def struct_step(cls: Any) -> Step:
    flexible = bool(cls.__flexible__)
    steps, tagged = _compile(cls, flexible)

    def step(buf: bytes, pos: int, end: int) -> int:
        for s in steps:
            pos = s(buf, pos, end)
        if not flexible:
            return pos
        if pos < end and buf[pos] == 0:  # no tagged fields: the common case
            return pos + 1
        section = pos
        count, pos = _uvarint(buf, pos, end)
        _need(pos, count * 2, end, "tagged fields")
        unknown: list[tuple[int, int]] = []
        for _ in range(count):
            entry = pos
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            stop = _need(pos, size, end, "tagged field")
            check = tagged.get(tag)
            if check is not None:
                _check_known_tag(check, buf, pos, stop)
            else:
                unknown.append((entry, stop))
            pos = stop
        if unknown and _unknown_tags is not None:
            _unknown_tags.append((section, pos, count, unknown))
        return pos

    return step


def _check_known_tag(check: Step, buf: bytes, pos: int, stop: int) -> None:
    """Unknown tags nested inside a known tagged field are not stripped (that would change
    the field's size prefix): kio then rejects the frame, which closes the connection."""
    global _unknown_tags
    saved, _unknown_tags = _unknown_tags, None
    try:
        check(buf, pos, stop)
    finally:
        _unknown_tags = saved


# Set only by strip_unknown_tags() while it walks one frame (synchronously, one thread).
_unknown_tags: list[tuple[int, int, int, list[tuple[int, int]]]] | None = None


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def strip_unknown_tags(cls: Any, buf: bytes, pos: int) -> bytes | None:
    """The frame without the tagged fields ``cls`` does not know (KIP-482: a receiver
    ignores unknown tags), or None when there are none. kio raises on unknown tags, so the
    codec retries with the stripped frame."""
    global _unknown_tags
    _unknown_tags = []
    try:
        struct_step(cls)(buf, pos, len(buf))
        sections = sorted(_unknown_tags)
    finally:
        _unknown_tags = None
    if not sections:
        return None
    out = bytearray()
    last = 0
    for start, stop, count, unknown in sections:
        out += buf[last:start]
        out += _varint_bytes(count - len(unknown))
        cursor = start + len(_varint_bytes(count))
        for entry, entry_stop in unknown:
            out += buf[cursor:entry]
            cursor = entry_stop
        out += buf[cursor:stop]
        last = stop
    out += buf[last:]
    return bytes(out)


def check_bounds(cls: Any, buf: bytes, pos: int) -> None:
    """Raise FrameBoundsError if any length/count in the body of ``cls`` overruns ``buf``."""
    struct_step(cls)(buf, pos, len(buf))
