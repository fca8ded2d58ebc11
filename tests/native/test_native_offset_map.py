"""The cleaner's offset map: the native slot work (MD5 + Kafka's probing) against the pure-Python
twin, on the same operation sequences over small maps (collisions, a full map)."""

from __future__ import annotations

import hashlib
from array import array
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_core_support import NativeMap, PythonMap, core, needs_core

from tidelog.storage.cleaner.batch_filter import ScannedRecord
from tidelog.storage.cleaner.offset_map import (
    BYTES_PER_ENTRY,
    OffsetMapFullError,
    SkimpyOffsetMap,
)
from tidelog.testing.capability import require_capability


def _apply(m: SkimpyOffsetMap, op: tuple[str, bytes, int]) -> Any:
    kind, key, offset = op
    try:
        return m.put(key, offset) if kind == "put" else m.get(key)
    except OffsetMapFullError as e:
        return ("full", str(e))


def _state(m: SkimpyOffsetMap) -> tuple[Any, ...]:
    return (bytes(m._bytes), m.size, m.collision_rate, m.latest_offset, list(m._used))


ops = st.lists(st.tuples(st.sampled_from(["put", "get"]),
                         st.one_of(st.binary(max_size=3), st.binary(min_size=50, max_size=130)),
                         st.integers(-(1 << 63), (1 << 63) - 1)), max_size=60)


@needs_core
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 9), ops)
def test_offset_map_twins_agree(slots: int, sequence: list[tuple[str, bytes, int]]) -> None:
    py, nat = PythonMap(slots * BYTES_PER_ENTRY), NativeMap(slots * BYTES_PER_ENTRY)
    for op in sequence:
        assert _apply(nat, op) == _apply(py, op)
        assert _state(nat) == _state(py)


@needs_core
def test_a_full_map_refuses_a_new_key_natively() -> None:
    m = NativeMap(2 * BYTES_PER_ENTRY)
    m.put(b"a", 1)
    m.put(b"b", 2)
    with pytest.raises(OffsetMapFullError):
        m.put(b"c", 3)
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c"), m.size) == (1, 2, -1, 2)


@needs_core
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_native_md5_is_md5(data: bytes) -> None:
    assert core.md5(data) == hashlib.md5(data).digest()


@needs_core
@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=56), st.binary(max_size=200)), max_size=40))
def test_lane_md5_is_md5(keys: list[bytes]) -> None:
    # The map hashes a call's keys in vector lanes (up to 55 bytes) and the rest one by one.
    assert core.md5_many(keys) == [hashlib.md5(k).digest() for k in keys]


def test_map_bound_to_the_selected_core() -> None:
    from tidelog import _native

    assert SkimpyOffsetMap._native is _native.core


def _records(items: list[tuple[int, bytes | None]]) -> list[ScannedRecord]:
    return [ScannedRecord(o, 0, k, True, 0, 0, 0, 0) for o, k in items]


def _put_records(m: SkimpyOffsetMap, recs: list[ScannedRecord], start: int, cap: int) -> Any:
    try:
        return m.put_records(recs, start, cap)
    except Exception as e:
        return (type(e), str(e))


@needs_core
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 9), st.integers(0, 11), st.integers(-3, 40),
       st.lists(st.lists(st.tuples(
           st.one_of(st.integers(-5, 60), st.integers(1 << 63, 1 << 66)),
           st.one_of(st.none(), st.binary(max_size=2))), max_size=25), max_size=4))
def test_put_records_twins_agree(slots: int, cap: int, start: int,
                                 batches: list[list[tuple[int, bytes | None]]]) -> None:
    """The cleaner's map loop (a batch at a time): same counts, fullness, errors and state."""
    py, nat = PythonMap(slots * BYTES_PER_ENTRY), NativeMap(slots * BYTES_PER_ENTRY)
    for items in batches:
        recs = _records(items)
        assert _put_records(nat, recs, start, cap) == _put_records(py, recs, start, cap)
        assert _state(nat) == _state(py)


@needs_core
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 9), st.lists(st.binary(max_size=2), max_size=12),
       st.lists(st.binary(max_size=2), max_size=30))
def test_get_many_twins_agree(slots: int, stored: list[bytes], asked: list[bytes]) -> None:
    py, nat = PythonMap(slots * BYTES_PER_ENTRY), NativeMap(slots * BYTES_PER_ENTRY)
    for i, k in enumerate(stored):
        assert _apply(nat, ("put", k, i)) == _apply(py, ("put", k, i))
    assert nat.get_many(asked) == py.get_many(asked)
    assert _state(nat) == _state(py)


record_st = st.tuples(st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d"])),
                      st.one_of(st.none(), st.just(b"v")), st.integers(0, 3))


@pytest.mark.parametrize("native", [False, True])
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_st, min_size=1, max_size=20), st.lists(record_st, max_size=20),
       st.integers(0, 45), st.one_of(st.none(), st.integers(0, 2000)),
       st.booleans())
def test_retain_records_is_should_retain_record_per_batch(
        native: bool, dirty: list[Any], batch_recs: list[Any], latest: int, horizon: int | None,
        control: bool) -> None:
    """The cleaner's batch-at-a-time filter keeps exactly what the per-record one keeps, with
    the same stats (invalid records) and offset-map counters, on either map."""
    from tidelog.records import RecordBatchBuilder
    from tidelog.records.batch import RecordBatch
    from tidelog.storage.cleaner.batch_filter import scan_records
    from tidelog.storage.cleaner.cleaner import CleanerStats, _CleanerFilter
    from tidelog.storage.cleaner.transactions import CleanedTransactionMetadata

    if native:  # skipped without the built core, a failure under CI (which builds it)
        require_capability("native core", core is not None,
                           "tidelog._native._core is not built (setup.py build_ext --inplace)")
    maps = []
    for _ in range(2):
        m = (NativeMap if native else PythonMap)(64 * BYTES_PER_ENTRY)
        for i, (key, _v, _g) in enumerate(dirty):
            if key is not None:
                m.put(key, i * 2)
        m.update_latest_offset(latest)
        maps.append(m)
    b = RecordBatchBuilder(delete_horizon_ms=horizon)
    offset = 0
    for key, value, gap in batch_recs or [(b"a", b"v", 0)]:
        offset += gap
        b.append(1000, key, value, offset=offset)
        offset += 1
    batch = RecordBatch(b.build())
    records = scan_records(batch)[1]
    out = []
    for m, batch_at_once in zip(maps, (True, False), strict=True):
        stats = CleanerStats()
        f = _CleanerFilter(m, CleanedTransactionMetadata(), {}, 1 << 40, 1500, 0, stats)
        f.check_batch_retention(batch)
        f._is_control = control
        kept = f.retain_records(batch, records) if batch_at_once else \
            [r for r in records if f.should_retain_record(batch, r)]
        out.append((kept, stats.invalid_messages_read, m.collision_rate, m._lookups))
    assert out[0] == out[1]


@needs_core
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(32, 200), st.lists(st.binary(max_size=3), max_size=20))
def test_clear_twins_agree(slots: int, keys: list[bytes]) -> None:
    """clear() zeroes exactly the used slots (natively while few are used): both maps end
    as a fresh one and behave alike afterwards."""
    py, nat = PythonMap(slots * BYTES_PER_ENTRY), NativeMap(slots * BYTES_PER_ENTRY)
    for m in (py, nat):
        for i, k in enumerate(keys):
            m.put(k, i)
        m.clear()
    assert _state(nat) == _state(py) == _state(PythonMap(slots * BYTES_PER_ENTRY))
    assert bytes(nat._bytes) == bytes(slots * BYTES_PER_ENTRY)
    with pytest.raises(ValueError):
        core.omap_clear(nat._bytes, array("q", [slots * BYTES_PER_ENTRY]))
