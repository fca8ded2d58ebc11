"""Java's String.hashCode, against values printed by Java 17's ``String.hashCode()``."""

from __future__ import annotations

import pytest

from tidelog.util.java_hash import java_abs, java_string_hash, to_int32


@pytest.mark.parametrize(
    ("s", "h"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("version", 351608024),
        ("__consumer_offsets", -970371369),  # overflows to negative
        ("__transaction_state", -253293552),
        ("my-group", -1906497762),
        ("polygenelubricants", -(1 << 31)),  # Integer.MIN_VALUE
        ("tidelog-topic-with-a-long-name", 1940922886),
        ("Aa", 2112),
        ("BB", 2112),
        ("\u00e9", 233),
        ("\U0001f600", 1772899),  # a surrogate pair: two UTF-16 code units
    ],
)
def test_java_string_hash_matches_java(s: str, h: int) -> None:
    assert java_string_hash(s) == h


def test_to_int32_wraps_like_java() -> None:
    assert to_int32(0x7FFFFFFF) == 2**31 - 1
    assert to_int32(0x80000000) == -(2**31)
    assert to_int32(-1) == -1
    # Java: 31 * "__consumer_offsets".hashCode() + 7, 31 * "hello".hashCode() + 3 in int arithmetic
    assert to_int32(31 * java_string_hash("__consumer_offsets") + 7) == -16741360
    assert to_int32(31 * java_string_hash("hello") + 3) == -1220935311


def test_java_abs_is_kafkas_utils_abs() -> None:
    assert java_abs(-(2**31)) == 0  # Integer.MIN_VALUE: Math.abs would keep it negative
    assert java_abs(-970371369) == 970371369
    assert java_abs(5) == 5
