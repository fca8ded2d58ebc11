"""Property: for random keyed streams with overwrites and tombstones in every codec, cleaning
leaves exactly the latest record per key (tombstones per the delete horizon), at their
original offsets with identical contents, and never touches the active segment."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from cleaner_helpers import batches, clean, make_cleaner, open_log, read_records
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.records import CompressionType, RecordBatchBuilder
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock

DELETE_RETENTION_MS = 10_000
NOW = 1_700_000_000_000

record = st.tuples(
    st.integers(0, 7),  # key
    st.one_of(st.none(), st.binary(max_size=24)),  # value (None = tombstone)
    st.lists(st.tuples(st.sampled_from(["a", "bb"]), st.one_of(st.none(), st.binary(max_size=4))),
             max_size=2),  # headers
    st.integers(-5000, 5000),  # timestamp delta
)
batch = st.tuples(st.sampled_from(list(CompressionType)),
                  st.lists(record, min_size=1, max_size=4), st.booleans())  # roll after?
stream = st.tuples(st.lists(batch, min_size=1, max_size=25), st.lists(batch, max_size=3))

Row = tuple[bytes | None, bytes | None, list[Any], int]


def _append(lg: Log, codec: CompressionType, recs: list[Any]) -> None:
    b = RecordBatchBuilder(codec)
    for key, value, headers, dts in recs:
        b.append(NOW + dts, b"k%d" % key, value, headers)
    lg.append_as_leader(b.build())
    lg.maybe_increment_high_watermark(lg.log_end_offset)


def _contents(lg: Log) -> dict[int, Row]:
    return {r.offset: (r.key, r.value, r.headers, r.timestamp) for r in read_records(lg)}


def _expected(original: dict[int, Row], end: int, expired_below: int) -> list[int]:
    """Offsets >= end, plus the latest per key below end, minus expired tombstones."""
    latest: dict[bytes | None, int] = {}
    for off in sorted(o for o in original if o < end):
        latest[original[off][0]] = off
    kept = [o for o in latest.values() if not (original[o][1] is None and o < expired_below)]
    return sorted(kept + [o for o in original if o >= end])


def _check(lg: Log, original: dict[int, Row], want: list[int]) -> None:
    got = _contents(lg)
    offsets = list(got)
    assert offsets == sorted(set(offsets))  # strictly increasing
    assert offsets == want
    assert all(got[o] == original[o] for o in offsets)  # identical keys/values/headers/ts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream)
def test_cleaning_keeps_exactly_the_latest_per_key(data: tuple[list[Any], list[Any]]) -> None:
    head, tail = data
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "prop-0"
        clock = ManualClock(NOW)
        lg = open_log(d, clock, delete_retention_ms=DELETE_RETENTION_MS)
        for codec, recs, roll in head:
            _append(lg, codec, recs)
            if roll:
                lg.roll()
        lg.roll()
        for codec, recs, _roll in tail:
            _append(lg, codec, recs)
        original = _contents(lg)
        active = lg.active_segment
        active_bytes = active.log.read_at(0, active.size)

        cleaner = make_cleaner(clock)
        end = clean(cleaner, lg)
        assert end == active.base_offset
        want = _expected(original, end, expired_below=-1)  # first pass: tombstones stay
        _check(lg, original, want)
        assert lg.active_segment is active
        assert active.log.read_at(0, active.size) == active_bytes
        for b in batches(lg):
            if b.last_offset < end and any(r.value is None for r in b.records):
                assert b.delete_horizon_ms == NOW + DELETE_RETENTION_MS
        lg.close()

        lg = open_log(d, clock, delete_retention_ms=DELETE_RETENTION_MS)
        _check(lg, original, want)  # the cleaned log survives a reopen

        # Second pass after the horizon: first-pass tombstones that are still latest go.
        clock.advance(DELETE_RETENTION_MS)
        _append(lg, CompressionType.NONE, [(99, b"fresh", [], 0)])
        original = _contents(lg) | original
        lg.roll()
        end2 = clean(cleaner, lg, first_dirty=end)
        _check(lg, original, _expected(original, end2, expired_below=end))
        lg.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream, st.integers(2, 12))
def test_small_offset_map_converges_over_rounds(data: tuple[list[Any], list[Any]],
                                                slots: int) -> None:
    """With a map too small for the dirty keys, each round cleans up to where the map
    reached (#132, #139); rounds continue from the checkpointed offset until the dirty range
    is done, and the log then holds exactly the latest record per key."""
    head, tail = data
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(NOW)
        lg = open_log(Path(tmp) / "small-0", clock, delete_retention_ms=DELETE_RETENTION_MS)
        for codec, recs, roll in head:
            _append(lg, codec, recs)
            if roll:
                lg.roll()
        lg.roll()
        for codec, recs, _roll in tail:
            _append(lg, codec, recs)
        original = _contents(lg)
        upper = lg.active_segment.base_offset
        cleaner = make_cleaner(clock, slots=slots, load_factor=0.75)
        dirty, rounds = 0, 0
        while dirty < upper:
            nxt = clean(cleaner, lg, first_dirty=dirty)
            assert nxt > dirty  # every round makes progress
            dirty, rounds = nxt, rounds + 1
            _check(lg, original, sorted(set(_contents(lg))))  # contents never change
        assert dirty == upper
        _check(lg, original, _expected(original, upper, expired_below=-1))
        lg.close()
