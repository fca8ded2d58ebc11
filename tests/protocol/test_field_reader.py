"""FieldReader: Kafka's classic and flexible primitives, every overrun a clear error."""

from __future__ import annotations

import pytest

from tidelog.protocol.codec import InvalidRequestError
from tidelog.protocol.field_reader import FieldReader


class _Strict(FieldReader):
    error = InvalidRequestError


def test_classic_fields() -> None:
    r = FieldReader(b"\x00\x02hi" b"\xff\xff" b"\x00\x00\x00\x01x" b"\xff\xff\xff\xff")
    assert r.nullable_string() == "hi"
    assert r.nullable_string() is None
    assert bytes(r.nullable_bytes() or b"") == b"x"
    assert r.array_len() == -1
    assert r.pos == len(r.buf)


def test_flexible_fields_and_tags_skipped() -> None:
    # compact string "ab", two tagged fields (tag 0 of 2 bytes, tag 5 of 0), compact null bytes
    r = FieldReader(b"\x03ab" b"\x02\x00\x02zz\x05\x00" b"\x00", flexible=True)
    assert r.nullable_string() == "ab"
    r.skip_tags()
    assert r.nullable_bytes() is None
    assert r.pos == len(r.buf)


@pytest.mark.parametrize("data, read, message", [
    (b"\x00\x09abc", "nullable_string", "field of 9 bytes at byte 2 runs past the end (5)"),
    (b"\x00\x00", "i32", "field of 4 bytes at byte 0 runs past the end (2)"),
    (b"\xff\xff\xff\xff\xff\x01", "uvarint", "varint too long at byte 5"),
    (b"\x80", "uvarint", "field of 1 bytes at byte 1 runs past the end (1)"),
])
def test_overruns_raise_the_readers_error(data: bytes, read: str, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message.replace("(", r"\(").replace(")", r"\)")):
        getattr(_Strict(data), read)()
