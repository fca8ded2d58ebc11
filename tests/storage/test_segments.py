"""LogSegments: the base-offset map with Kafka's floor/lower/higher lookups (LogSegmentsTest)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.records import build_batch
from tidelog.storage.segment import LogSegment, SegmentConfig
from tidelog.storage.segments import LogSegments
from tidelog.util.clock import ManualClock


@pytest.fixture
def segs(tmp_path: Path) -> Iterator[tuple[LogSegments, dict[int, LogSegment]]]:
    s = LogSegments()
    made = {}
    for base in (1, 5, 10, 20):
        seg = LogSegment.open(tmp_path, base, SegmentConfig(), ManualClock())
        seg.append(base, 100, base, build_batch([(100, None, b"x" * base)], base_offset=base))
        made[base] = seg
        s.add(seg)
    yield s, made
    s.close_handlers()


def test_empty(tmp_path: Path) -> None:
    s = LogSegments()
    assert s.is_empty() and len(s) == 0
    assert s.floor_segment(5) is None and s.higher_segment(5) is None
    assert s.first_segment is None and s.last_segment is None
    with pytest.raises(LookupError):
        s.active_segment  # noqa: B018
    assert s.values() == [] and s.values(0, 10) == []


def test_basic_operations(tmp_path: Path) -> None:
    s = LogSegments()
    a = LogSegment.open(tmp_path, 0, SegmentConfig(), ManualClock())
    assert s.add(a) is None
    assert s.contains(0) and 0 in s and s.get(0) is a and s.number_of_segments == 1
    b = LogSegment.open(tmp_path, 0, SegmentConfig(), ManualClock())
    assert s.add(b) is a  # same base offset: replaced
    assert s.get(0) is b and len(s) == 1
    assert s.remove(0) is b and s.is_empty()
    assert s.remove(0) is None
    a.close_handlers()
    b.close_handlers()


def test_ordering_and_lookups(segs: tuple[LogSegments, dict[int, LogSegment]]) -> None:
    s, m = segs
    assert s.base_offsets() == [1, 5, 10, 20]
    assert [x.base_offset for x in s] == [1, 5, 10, 20]
    assert s.first_segment is m[1] and s.last_segment is m[20] and s.active_segment is m[20]
    assert s.floor_segment(0) is None
    assert s.floor_segment(1) is m[1] and s.floor_segment(9) is m[5] and s.floor_segment(10) is m[10]
    assert s.floor_segment(10**9) is m[20]
    assert s.lower_segment(1) is None and s.lower_segment(10) is m[5] and s.lower_segment(11) is m[10]
    assert s.higher_segment(0) is m[1] and s.higher_segment(5) is m[10] and s.higher_segment(20) is None
    assert s.higher_segments(5) == [m[10], m[20]]
    assert s.first_segment_base_offset == 1
    assert s.size_in_bytes == sum(x.size for x in m.values())


def test_values_range(segs: tuple[LogSegments, dict[int, LogSegment]]) -> None:
    s, _m = segs

    def bases(lo: int, hi: int) -> list[int]:
        return [x.base_offset for x in s.values(lo, hi)]

    assert bases(5, 5) == []
    assert bases(0, 6) == [1, 5]  # from below the first segment: everything up to `to`
    assert bases(6, 10) == [5]  # starts at the floor segment of `from`
    assert bases(6, 11) == [5, 10]
    assert bases(10, 100) == [10, 20]
    assert bases(21, 30) == [20]
    with pytest.raises(ValueError):
        s.values(10, 5)
    assert [x.base_offset for x in s.non_active_log_segments_from(6)] == [5, 10]
    assert s.non_active_log_segments_from(20) == []


def test_values_is_a_snapshot(segs: tuple[LogSegments, dict[int, LogSegment]]) -> None:
    s, m = segs
    snapshot = s.values()
    s.remove(5)
    assert [x.base_offset for x in snapshot] == [1, 5, 10, 20]
    assert s.base_offsets() == [1, 10, 20]
    s.add(m[5])
