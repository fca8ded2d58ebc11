"""SkimpyOffsetMap: bounded memory, open addressing, latest offset per key hash."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.storage.cleaner.offset_map import BYTES_PER_ENTRY, OffsetMapFullError, SkimpyOffsetMap


def test_slots_from_memory() -> None:
    m = SkimpyOffsetMap(24 * 100 + 23)
    assert m.slots == 100
    assert m.max_entries(0.9) == 90
    assert m.max_entries(0.75) == 75
    with pytest.raises(ValueError):
        SkimpyOffsetMap(BYTES_PER_ENTRY - 1)


def test_put_get_overwrite_and_latest_offset() -> None:
    m = SkimpyOffsetMap(24 * 64)
    assert m.get(b"a") == -1
    assert m.latest_offset == -1
    m.put(b"a", 5)
    m.put(b"b", 7)
    m.put(b"a", 9)
    assert m.get(b"a") == 9
    assert m.get(b"b") == 7
    assert m.get(b"c") == -1
    assert m.size == 2
    assert m.latest_offset == 9
    assert m.utilization == pytest.approx(2 / 64)
    m.update_latest_offset(12)
    assert m.latest_offset == 12


def test_offset_zero_is_stored() -> None:
    m = SkimpyOffsetMap(24 * 4)
    m.put(b"k", 0)
    assert m.get(b"k") == 0
    assert m.size == 1


def test_clear() -> None:
    m = SkimpyOffsetMap(24 * 8)
    for i in range(5):
        m.put(str(i).encode(), i)
    m.clear()
    assert m.size == 0
    assert m.latest_offset == -1
    assert all(m.get(str(i).encode()) == -1 for i in range(5))


def test_every_slot_usable_then_full() -> None:
    m = SkimpyOffsetMap(24 * 3)
    for i in range(3):
        m.put(f"key{i}".encode(), 100 + i)
    assert [m.get(f"key{i}".encode()) for i in range(3)] == [100, 101, 102]
    assert m.utilization == 1.0
    m.put(b"key1", 200)  # an existing key still updates
    assert m.get(b"key1") == 200
    with pytest.raises(OffsetMapFullError):
        m.put(b"new", 1)
    assert m.get(b"absent") == -1  # lookups in a full map terminate


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=12), st.integers(0, 2**62)), max_size=200))
def test_matches_dict_model(ops: list[tuple[bytes, int]]) -> None:
    m = SkimpyOffsetMap(24 * 256)
    model: dict[bytes, int] = {}
    for key, off in ops:
        m.put(key, off)
        model[key] = off
    assert m.size == len(model)
    for key, off in model.items():
        assert m.get(key) == off
    assert m.get(b"\xff" * 13) == -1
    if ops:
        assert m.latest_offset == ops[-1][1]


@pytest.mark.parametrize("n", [3, 40])  # below and above the tracked-slots limit (64 // 32)
def test_clear_after_few_or_many_entries(n: int) -> None:
    m = SkimpyOffsetMap(24 * 64)
    for i in range(n):
        m.put(b"k%d" % i, i + 1)
    m.clear()
    assert m.size == 0
    assert all(m.get(b"k%d" % i) == -1 for i in range(n))
    assert bytes(m._bytes) == bytes(24 * 64)
    m.put(b"again", 5)
    assert m.get(b"again") == 5


def test_a_map_that_lost_track_of_its_slots_is_cleared_whole() -> None:
    """After a native loop failed midway (slots written, counters not), clear() must not
    trust the used-slot list: a stale entry would make the next round drop live records."""
    m = SkimpyOffsetMap(64 * 24)
    m.put(b"known", 1)
    m._bytes[24 * 5 : 24 * 6] = b"\x01" * 24  # a slot the map never heard of
    m.lose_track()
    m.clear()
    assert bytes(m._bytes) == bytes(64 * 24)
    assert (m.size, m.get(b"known"), m.latest_offset) == (0, -1, -1)
