"""LogSegment: Kafka's behaviours #26-#44 and the segment side of rolling (#60-#64)."""

from __future__ import annotations

import itertools
import os
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka.record import MemoryRecords

from tidelog.records import ControlRecordType, RecordBatch, RecordBatchBuilder
from tidelog.storage.errors import LogSegmentOffsetOverflowError
from tidelog.storage.file_records import FileRecords
from tidelog.storage.log_file_utils import log_file, offset_from_file_name
from tidelog.storage.producer_state import ProducerStateManager
from tidelog.storage.segment import (
    LONG_MAX,
    POSITION_UNKNOWN,
    LogOffsetMetadata,
    LogSegment,
    SegmentConfig,
)
from tidelog.util.clock import ManualClock

INT_MAX = 2**31 - 1


def records(offset: int, *values: str, ts: int | None = None, epoch: int = -1) -> bytes:
    """Kafka's test helper: one batch from ``offset``, every record stamped offset * 10."""
    b = RecordBatchBuilder(base_offset=offset, partition_leader_epoch=epoch)
    for v in values:
        b.append(offset * 10 if ts is None else ts, None, v.encode())
    return b.build()


def append(seg: LogSegment, data: bytes, largest_ts: int | None = None) -> None:
    """Append one batch the way the Log does (largest offset/timestamp from the header)."""
    base, delta, max_ts = struct.unpack_from(">q", data)[0], struct.unpack_from(">i", data, 23)[0], struct.unpack_from(">q", data, 35)[0]
    seg.append(base + delta, max_ts if largest_ts is None else largest_ts, base + delta, data)


SegFactory = Callable[..., LogSegment]


@pytest.fixture
def make(tmp_path: Path) -> Iterator[SegFactory]:
    opened: list[LogSegment] = []

    def factory(base: int, index_interval_bytes: int = 10, clock: ManualClock | None = None,
                max_index: int = 1000, **kw: object) -> LogSegment:
        cfg = SegmentConfig(index_interval_bytes=index_interval_bytes, segment_index_bytes=max_index)
        seg = LogSegment.open(tmp_path, base, cfg, clock or ManualClock(), **kw)  # type: ignore[arg-type]
        opened.append(seg)
        return seg

    yield factory
    for s in opened:
        s.close_handlers()


def batch_offsets(seg: LogSegment) -> list[int]:
    return [b.last_offset for b in seg.log.batches()]


def read_values(info_records: object) -> list[bytes | None]:
    return [r.value for b in info_records.batches() for r in b]  # type: ignore[attr-defined]


# -- naming ---------------------------------------------------------------------------------
def test_file_names(tmp_path: Path, make: SegFactory) -> None:
    seg = make(0)
    assert seg.log.path.name == "00000000000000000000.log"
    assert seg.offset_index.path.name == "00000000000000000000.index"
    assert seg.time_index.path.name == "00000000000000000000.timeindex"
    assert log_file(tmp_path, 12345).name == "00000000000000012345.log"
    assert offset_from_file_name("00000000000000012345.log.deleted") == 12345


# -- reads ----------------------------------------------------------------------------------
def test_read_on_empty_segment(make: SegFactory) -> None:  # 26
    assert make(40).read(40, 300) is None


def test_read_before_first_offset(make: SegFactory) -> None:  # 27
    seg = make(40)
    data = records(50, "hello", "there", "little", "bee")
    append(seg, data)
    read = seg.read(41, 300)
    assert read is not None and read.records.read() == data


def test_read_after_last(make: SegFactory) -> None:  # 28
    seg = make(40)
    append(seg, records(50, "hello", "there"))
    assert seg.read(52, 200) is None


def test_read_from_gap(make: SegFactory) -> None:  # 29
    seg = make(40)
    append(seg, records(50, "hello", "there"))
    second = records(60, "alpha", "beta")
    append(seg, second)
    read = seg.read(55, 200)
    assert read is not None and read.records.read() == second


@pytest.mark.parametrize("min_one", [True, False])
def test_read_when_no_max_position(make: SegFactory, min_one: bool) -> None:  # 30
    seg = make(40)
    append(seg, records(50, "hello", "there"))
    for offset in (48, 50, 51):
        read = seg.read(offset, 1, POSITION_UNKNOWN, min_one)
        assert read is not None
        assert read.fetch_offset_metadata == LogOffsetMetadata(offset, 40, 0)
        assert read.records.size == 0
    assert seg.read(52, 1, POSITION_UNKNOWN, min_one) is None
    assert seg.read(53, 1, POSITION_UNKNOWN, min_one) is None


def test_read_with_max_size_zero(make: SegFactory) -> None:  # 31
    seg = make(0)
    append(seg, records(0, "a"))
    read = seg.read(0, 0)
    assert read is not None and read.records.size == 0 and read.records.read() == b""
    assert read.fetch_offset_metadata == LogOffsetMetadata(0, 0, 0)


def test_read_limits(make: SegFactory) -> None:  # 32
    seg = make(0)
    first, second = records(0, "hello" * 20), records(1, "world" * 20)
    append(seg, first)
    append(seg, second)
    read = seg.read(0, 1, min_one_message=True)
    assert read is not None and read.records.read() == first and not read.first_entry_incomplete
    read = seg.read(0, 1, min_one_message=False)
    assert read is not None and read.records.size == 1 and read.first_entry_incomplete
    read = seg.read(0, 10_000, max_position=len(first))  # bounded by max position
    assert read is not None and read.records.read() == first
    read = seg.read(1, 10_000)
    assert read is not None and read.records.position == len(first)
    assert read.records.read() == second
    read = seg.read(0, len(first) + 5)
    assert read is not None and read.records.size == len(first) + 5
    with pytest.raises(ValueError):
        seg.read(0, -1)


def test_read_uses_index_then_short_scan(make: SegFactory) -> None:
    seg = make(0, index_interval_bytes=200)
    batches = [records(i, f"v{i:03d}") for i in range(200)]
    for b in batches:
        append(seg, b)
    assert seg.offset_index.entries > 10
    for target in (0, 1, 57, 150, 199):
        read = seg.read(target, 10 ** 6)
        assert read is not None
        assert read.records.position == sum(map(len, batches[:target]))
        assert read_values(read.records)[0] == b"v%03d" % target


# -- append ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("base", "largest"),
    [(0, -(2**31)), (0, 2**31), (1, 0), (100, 10), (2**31, 0), (-(2**31), 0), (2**31, 2**32)],
)
def test_append_offset_overflow(make: SegFactory, base: int, largest: int) -> None:  # 33
    seg = make(max(base, 0))
    seg.base_offset = base  # the file name cannot be negative; the check uses the base only
    with pytest.raises(LogSegmentOffsetOverflowError):
        seg.append(largest, 1, largest, records(0, "hello"))
    assert seg.size == 0


def test_index_cadence_and_reload_after_truncation(make: SegFactory) -> None:  # 34, 35
    size = len(records(0, "hello"))
    seg = make(40, index_interval_bytes=2 * size - 1)
    offset = 40
    for _ in range(30):
        append(seg, records(offset, "hello"))
        offset += 1
    assert seg.read_next_offset() == offset
    assert seg.time_index.entries == 14
    assert seg.offset_index.entries == 14
    assert seg.offset_index.entry(0) == (42, 2 * size)  # first entry at the third append
    seg.truncate_to(41)
    assert seg.time_index.entries == 0
    assert seg.largest_timestamp == 400
    assert seg.read_next_offset() == 41


def test_first_append_never_indexed(make: SegFactory) -> None:  # 34
    seg = make(0, index_interval_bytes=0)
    append(seg, records(0, "x" * 100))
    assert seg.offset_index.entries == 0 and seg.time_index.entries == 0
    append(seg, records(1, "y"))
    assert seg.offset_index.entries == 1


def test_max_timestamp_tracking(make: SegFactory) -> None:
    seg = make(0)
    append(seg, records(0, "a", ts=500))
    append(seg, records(1, "b", ts=300))
    append(seg, records(2, "c", ts=700))
    append(seg, records(3, "d", ts=700))
    assert seg.max_timestamp_so_far == 700
    assert seg.shallow_offset_of_max_timestamp_so_far == 2


# -- truncation -----------------------------------------------------------------------------
def test_truncate(make: SegFactory) -> None:  # 35
    seg = make(40)
    offset = 40
    for _ in range(30):
        ms1, ms2 = records(offset, "hello"), records(offset + 1, "hello")
        append(seg, ms1)
        append(seg, ms2)
        read = seg.read(offset, 10_000)
        assert read is not None and read.records.read() == ms1 + ms2
        removed = seg.truncate_to(offset + 1)
        assert removed == len(ms2)
        read2 = seg.read(offset, 10_000)
        assert read2 is not None and read2.records.read() == ms1
        offset += 1


def test_truncate_into_gap(make: SegFactory) -> None:  # 35
    seg = make(40)
    append(seg, records(40, "first message"))
    after_gap = records(43, "message after gap")
    append(seg, after_gap)
    assert seg.truncate_to(41) == len(after_gap)
    assert batch_offsets(seg) == [40]
    assert seg.read_next_offset() == 41


def test_truncate_full_resets_creation_time(make: SegFactory) -> None:  # 36
    clock = ManualClock(0)
    seg = make(40, clock=clock)
    append(seg, records(40, "hello", "there"), largest_ts=-1)
    clock.advance(500)
    assert seg.time_waited_for_roll(clock.milliseconds(), -1) == 500
    seg.truncate_to(0)
    assert seg.time_waited_for_roll(clock.milliseconds(), -1) == 0
    assert not seg.time_index.is_full() and not seg.offset_index.is_full()
    assert seg.read(0, 1024) is None
    append(seg, records(40, "hello", "there"), largest_ts=-1)
    assert seg.read_next_offset() == 42


def test_truncate_empty_segment(make: SegFactory) -> None:  # 36, 63
    clock = ManualClock(0)
    max_segment_ms = 300_000
    seg = make(0, clock=clock)
    seg.time_index.entries, seg.offset_index.entries  # force the indexes to load  # noqa: B018
    seg.close()
    reopened = make(0, clock=clock)
    assert reopened.time_index.size_in_bytes == 0 and reopened.offset_index.size_in_bytes == 0
    assert reopened.offset_index.is_full()  # a trimmed, empty index has no room yet
    clock.advance(500)
    reopened.truncate_to(57)
    assert reopened.time_waited_for_roll(clock.milliseconds(), -1) == 0
    assert not reopened.time_index.is_full() and not reopened.offset_index.is_full()

    def roll(max_offset: int) -> bool:
        return reopened.should_roll(
            max_segment_ms=max_segment_ms, max_segment_bytes=INT_MAX, max_timestamp_in_messages=-1,
            max_offset_in_messages=max_offset, messages_size=1024, now=clock.milliseconds(),
        )

    assert not roll(100)
    clock.advance(max_segment_ms + 1)
    assert reopened.time_waited_for_roll(clock.milliseconds(), -1) == max_segment_ms + 1
    assert not roll(100)  # an empty segment never rolls on time
    assert roll(INT_MAX + 200)  # but does on offset overflow


def test_read_next_offset(make: SegFactory) -> None:  # 37
    seg = make(40)
    assert seg.read_next_offset() == 40
    append(seg, records(50, "hello", "there", "you"))
    assert seg.read_next_offset() == 53


# -- timestamps -----------------------------------------------------------------------------
def test_find_offset_by_timestamp(make: SegFactory) -> None:  # 38
    size = len(records(0, "msg00"))
    seg = make(40, index_interval_bytes=size * 2 - 1)
    for i in range(40, 50):
        append(seg, records(i, f"msg{i}"))
    assert seg.largest_timestamp == 490

    def find(ts: int) -> int | None:
        r = seg.find_offset_by_timestamp(ts, 0)
        return None if r is None else r.offset

    assert [find(t) for t in (420, 421, 430, 431, 401, 399, 491)] == [42, 43, 43, 44, 41, 40, None]
    r = seg.find_offset_by_timestamp(420, 43)  # starting offset bounds the answer
    assert r is not None and (r.offset, r.timestamp) == (43, 430)


def test_first_batch_timestamp(make: SegFactory) -> None:  # 42
    seg = make(40)
    assert seg.first_batch_timestamp() == LONG_MAX
    append(seg, records(40, "hello", ts=1000))
    assert seg.first_batch_timestamp() == 1000


def test_first_batch_timestamp_after_reopen(make: SegFactory) -> None:
    seg = make(40)
    append(seg, records(40, "a", ts=1000))
    append(seg, records(41, "b", ts=2000))
    seg.close()
    assert make(40).first_batch_timestamp() == 1000


# -- recovery -------------------------------------------------------------------------------
def fill(seg: LogSegment, n: int, epoch: int = -1) -> list[bytes]:
    out = []
    for i in range(n):
        data = records(seg.base_offset + i, str(i), epoch=epoch)
        append(seg, data)
        out.append(data)
    return out


def assert_all_lookups(seg: LogSegment, n: int) -> None:
    for i in range(n):
        o = seg.base_offset + i
        read = seg.read(o, 1 << 20)
        assert read is not None and read_values(read.records)[0] == str(i).encode()
        found = seg.find_offset_by_timestamp(o * 10, seg.base_offset)
        assert found is not None and found.offset == o


def test_recovery_fixes_corrupt_index(make: SegFactory) -> None:  # 39
    seg = make(0, max_index=10_000)
    fill(seg, 100)
    idx_path = seg.offset_index.path
    seg.close()
    data = bytearray(idx_path.read_bytes())
    rng = random.Random(1)
    for i in range(0, len(data), 7):
        data[i] = rng.randrange(256)
    idx_path.write_bytes(bytes(data))
    seg = make(0, max_index=10_000)
    assert seg.recover() == 0
    assert_all_lookups(seg, 100)


def test_recovery_fixes_corrupt_time_index(make: SegFactory) -> None:  # 39
    seg = make(0, max_index=10_000)
    fill(seg, 100)
    ti = seg.time_index.path
    seg.close()
    ti.write_bytes(os.urandom(ti.stat().st_size))
    seg = make(0, max_index=10_000)
    seg.recover()
    assert_all_lookups(seg, 100)


def test_recovery_with_deleted_indexes(make: SegFactory) -> None:
    seg = make(0)
    fill(seg, 50)
    seg.close()
    expected = (seg.offset_index.path.read_bytes(), seg.time_index.path.read_bytes())
    assert len(expected[0]) > 8 * 10 and len(expected[1]) > 12 * 10
    seg.offset_index.path.unlink()
    seg.time_index.path.unlink()
    seg = make(0)
    assert seg.recover() == 0
    assert_all_lookups(seg, 50)
    seg.close()
    # rebuilt byte-for-byte as the appends wrote them
    assert (seg.offset_index.path.read_bytes(), seg.time_index.path.read_bytes()) == expected


@pytest.mark.parametrize("seed", range(10))
def test_recovery_with_corrupt_message(make: SegFactory, seed: int) -> None:  # 39
    rng = random.Random(seed)
    seg = make(0)
    fill(seg, 20)
    start = rng.randrange(20)
    found = seg.log.search_for_offset_with_size(start, 0)
    assert found is not None
    position = found.position + rng.randrange(15)
    length = seg.size - position
    with open(seg.log.path, "r+b") as f:
        f.seek(position)
        f.write(bytes(rng.randrange(256) for _ in range(length)))
    seg.recover()
    assert batch_offsets(seg) == list(range(start))
    assert seg.read_next_offset() == start


def test_recovery_of_garbage_tail(make: SegFactory) -> None:
    seg = make(0)
    fill(seg, 10)
    good = seg.size
    with open(seg.log.path, "ab") as f:
        f.write(b"\xde\xad\xbe\xef" * 100)
    reopened = make(0)
    assert reopened.size == good + 400
    assert reopened.recover() == 400
    assert reopened.size == good == seg.log.path.stat().st_size
    assert batch_offsets(reopened) == list(range(10))


def test_recovery_of_truncated_last_batch(make: SegFactory) -> None:
    seg = make(0)
    data = fill(seg, 10)
    cut = len(data[-1]) // 2
    os.truncate(seg.log.path, seg.size - cut)
    reopened = make(0)
    assert reopened.recover() == len(data[-1]) - cut
    assert batch_offsets(reopened) == list(range(9))
    assert reopened.read_next_offset() == 9


def test_recovery_of_bit_flip_in_last_batch(make: SegFactory) -> None:
    seg = make(0)
    data = fill(seg, 10)
    with open(seg.log.path, "r+b") as f:
        f.seek(seg.size - 3)
        byte = f.read(1)[0]
        f.seek(seg.size - 3)
        f.write(bytes([byte ^ 0x10]))
    reopened = make(0)
    assert reopened.recover() == len(data[-1])
    assert batch_offsets(reopened) == list(range(9))
    assert_all_lookups(reopened, 9)


def test_recovery_rebuilds_epoch_cache(make: SegFactory) -> None:  # 41
    class EpochCache:  # Kafka's LeaderEpochFileCache contract: latest_epoch / assign
        def __init__(self) -> None:
            self.entries: list[tuple[int, int]] = []

        def latest_epoch(self) -> int | None:
            return self.entries[-1][0] if self.entries else None

        def assign(self, epoch: int, start: int) -> None:
            self.entries.append((epoch, start))

    seg = make(100)
    for base, epoch in ((104, 0), (106, 1), (108, 1), (110, 2)):
        append(seg, records(base, "a", "b", epoch=epoch))
    cache = EpochCache()
    seg.recover(leader_epoch_cache=cache)
    assert cache.entries == [(0, 104), (1, 106), (2, 110)]


def test_recovery_offset_overflow_raises(tmp_path: Path, make: SegFactory) -> None:  # 39
    seg = make(0)
    append(seg, records(0, "a"))
    seg.log.append(records(2**31 + 5, "far"))  # written behind the segment's back
    with pytest.raises(LogSegmentOffsetOverflowError):
        seg.recover()


# -- files ----------------------------------------------------------------------------------
def test_change_file_suffixes(tmp_path: Path, make: SegFactory) -> None:  # 43
    seg = make(40)
    assert not seg.offset_index.path.exists() and not seg.time_index.path.exists()
    seg.change_file_suffixes("", ".deleted")
    assert seg.log.path.name == "00000000000000000040.log.deleted"
    assert seg.offset_index.path.name == "00000000000000000040.index.deleted"
    assert seg.time_index.path.name == "00000000000000000040.timeindex.deleted"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000040.log.deleted"]
    assert not seg.offset_index.path.exists() and not seg.time_index.path.exists()
    seg.change_file_suffixes(".deleted", "")
    append(seg, records(40, "a"))
    append(seg, records(41, "b"))
    seg.change_file_suffixes("", ".cleaned")  # existing index files move too
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000040.index.cleaned", "00000000000000000040.log.cleaned",
        "00000000000000000040.timeindex.cleaned",
    ]
    read = seg.read(41, 100)
    assert read is not None and read_values(read.records) == [b"b"]
    with pytest.raises(ValueError):
        seg.change_file_suffixes(".swap", "")


def test_append_from_file(tmp_path: Path, make: SegFactory) -> None:  # 44
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    fr = FileRecords.open(src_dir / "00000000000000000000.log")
    for o in (0, 1, 2, INT_MAX + 5, INT_MAX + 6):
        fr.append(records(o, "hello"))
    size = len(records(0, "hello"))
    seg1 = make(0)
    assert seg1.append_from_file(fr, 0) == 3 * size
    seg2 = make(INT_MAX + 5)
    assert seg2.append_from_file(fr, 3 * size) == 2 * size
    assert batch_offsets(seg1) == [0, 1, 2] and batch_offsets(seg2) == [INT_MAX + 5, INT_MAX + 6]
    fr.close_handlers()


def test_delete(tmp_path: Path, make: SegFactory) -> None:
    seg = make(0, index_interval_bytes=0)
    fill(seg, 3)
    assert len(list(tmp_path.iterdir())) == 3
    seg.delete()
    assert list(tmp_path.iterdir()) == []


def test_preallocated_segment_clean_shutdown(make: SegFactory) -> None:
    seg = make(40, preallocate=True, init_file_size=512 * 1024 * 1024 // 512)
    assert seg.log.file_length() == 1024 * 1024 and seg.size == 0
    fill(seg, 5)
    size = seg.size
    seg.close()
    assert seg.log.path.stat().st_size == size
    again = make(40, preallocate=True, init_file_size=1024 * 1024)
    assert again.size == size and again.read_next_offset() == 45


def test_close_then_reopen_keeps_max_timestamp(make: SegFactory) -> None:
    seg = make(0, index_interval_bytes=10**6)
    append(seg, records(0, "a", ts=100))
    append(seg, records(1, "b", ts=900))
    append(seg, records(2, "c", ts=500))
    seg.close()  # appends the final time-index entry (900, 1)
    again = make(0)
    assert again.max_timestamp_so_far == 900
    assert again.shallow_offset_of_max_timestamp_so_far == 1
    assert again.time_index.entries == 1


# -- rolling --------------------------------------------------------------------------------
def _roll(seg: LogSegment, *, now: int, ts: int = -1, offset: int | None = None, size: int = 100,
          max_bytes: int = INT_MAX, max_ms: int = 1000) -> bool:
    return seg.should_roll(
        max_segment_ms=max_ms, max_segment_bytes=max_bytes, max_timestamp_in_messages=ts,
        max_offset_in_messages=seg.base_offset if offset is None else offset,
        messages_size=size, now=now,
    )


def test_size_based_roll(make: SegFactory) -> None:  # 60
    seg = make(0)
    data = records(0, "x" * 100)
    append(seg, data)
    n = seg.size
    assert not _roll(seg, now=0, size=50, max_bytes=n + 50)  # fills to exactly segment.bytes
    assert _roll(seg, now=0, size=51, max_bytes=n + 50)


def test_time_based_roll_without_timestamps(make: SegFactory) -> None:  # 61
    clock = ManualClock(0)
    seg = make(0, clock=clock)
    append(seg, records(0, "a"), largest_ts=-1)
    clock.advance(1000)
    assert not _roll(seg, now=clock.milliseconds())
    clock.advance(1)
    assert _roll(seg, now=clock.milliseconds())


def test_time_based_roll_with_timestamps(make: SegFactory) -> None:  # 61
    clock = ManualClock(0)
    seg = make(0, clock=clock)
    append(seg, records(0, "a", ts=5000))
    clock.advance(10**6)  # the wall clock alone does not roll a timestamped segment
    assert not _roll(seg, now=clock.milliseconds(), ts=5500)
    assert not _roll(seg, now=clock.milliseconds(), ts=6000)
    assert _roll(seg, now=clock.milliseconds(), ts=6001)


def test_roll_jitter(make: SegFactory) -> None:  # 62
    clock = ManualClock(0)
    seg = make(0, clock=clock, roll_jitter_ms=300)
    append(seg, records(0, "a", ts=0))
    assert not _roll(seg, now=0, ts=700)
    assert _roll(seg, now=0, ts=701)


def test_random_jitter_bounds(tmp_path: Path) -> None:  # 62
    cfg = SegmentConfig(segment_ms=50, segment_jitter_ms=1000)
    jitters = {LogSegment.open(tmp_path, i, cfg, ManualClock()).roll_jitter_ms for i in range(40)}
    assert jitters <= set(range(50)) and len(jitters) > 1
    assert LogSegment.open(tmp_path, 99, SegmentConfig(), ManualClock()).roll_jitter_ms == 0


def test_index_full_roll(make: SegFactory) -> None:  # 63
    seg = make(0, index_interval_bytes=0, max_index=36)
    for i in range(3):
        assert not _roll(seg, now=0, offset=i)
        append(seg, records(i, "a"))
    # 4 offset slots, 2 used (the first append adds none); 3 time slots, one kept free
    assert seg.offset_index.entries == 2 and not seg.offset_index.is_full()
    assert seg.time_index.max_entries == 3 and seg.time_index.is_full()
    assert _roll(seg, now=0, offset=3)


def test_offset_index_full_roll(make: SegFactory) -> None:  # 63
    seg = make(0, index_interval_bytes=0, max_index=48)
    for i in range(7):
        assert not _roll(seg, now=0, offset=i)
        append(seg, records(i, "a", ts=7))  # one timestamp: the time index keeps 1 entry
    assert seg.offset_index.is_full() and not seg.time_index.is_full()
    assert _roll(seg, now=0, offset=7)


def test_becoming_inactive_trims(make: SegFactory) -> None:  # 64
    size = len(records(0, "hello"))
    seg = make(0, index_interval_bytes=size - 1)
    for i in range(10):
        append(seg, records(i, "hello"))
    assert seg.offset_index.entries == 9
    seg.on_becoming_inactive()
    assert seg.offset_index.max_entries == 9
    assert seg.offset_index.path.stat().st_size == 9 * 8
    assert seg.time_index.path.stat().st_size == seg.time_index.entries * 12
    seg.truncate_to(5)  # truncation gives the indexes their full size back
    assert seg.offset_index.max_entries == 1000 // 8


# -- independent readers --------------------------------------------------------------------
def test_files_read_by_independent_readers(make: SegFactory) -> None:
    seg = make(1000, index_interval_bytes=300)
    expected = []
    rng = random.Random(3)
    offset, ts = 1000, 1_700_000_000_000
    for _ in range(60):
        n = rng.randrange(1, 5)
        values = [os.urandom(rng.randrange(10, 120)) for _ in range(n)]
        b = RecordBatchBuilder(base_offset=offset)
        for v in values:
            b.append(ts + rng.randrange(-50, 100), None, v)
        append(seg, b.build())
        expected.extend((offset + k, v) for k, v in enumerate(values))
        offset += n + rng.randrange(0, 3)  # some gaps, as compaction leaves
        ts += 100
    seg.on_becoming_inactive()
    raw = seg.log.path.read_bytes()
    mr = MemoryRecords(raw)
    got, starts = [], {}
    pos = 0
    while (kb := mr.next_batch()) is not None:
        assert kb.validate_crc()
        starts[pos] = (kb.last_offset, kb.max_timestamp)
        pos += kb.size_in_bytes
        got.extend((r.offset, r.value) for r in kb)
    assert got == expected
    idx = seg.offset_index.path.read_bytes()
    assert len(idx) % 8 == 0 and len(idx) // 8 == seg.offset_index.entries > 5
    prev = -1
    for i in range(0, len(idx), 8):
        rel, position = struct.unpack_from(">ii", idx, i)
        assert rel > prev and position in starts  # each entry points at a batch start
        assert starts[position][0] == 1000 + rel  # ...whose last offset it names
        prev = rel
    tidx = seg.time_index.path.read_bytes()
    entries = [struct.unpack_from(">qi", tidx, i) for i in range(0, len(tidx), 12)]
    assert entries and all(a[0] < b[0] and a[1] <= b[1] for a, b in itertools.pairwise(entries))
    for t, rel in entries:  # T is the max timestamp seen up to and including the batch of O
        upto = [mt for lo, mt in starts.values() if lo <= 1000 + rel]
        assert max(upto) == t


def test_recover_transaction_index(make: SegFactory, tmp_path: Path) -> None:  # 40
    def txn(base: int, pid: int, seq: int, *vals: str) -> bytes:
        b = RecordBatchBuilder(base_offset=base, producer_id=pid, producer_epoch=0,
                               base_sequence=seq, is_transactional=True)
        for v in vals:
            b.append(base * 10, None, v.encode())
        return b.build()

    def marker(base: int, pid: int, kind: ControlRecordType) -> bytes:
        b = RecordBatchBuilder(base_offset=base, producer_id=pid, producer_epoch=0,
                               is_transactional=True, is_control=True)
        b.append_control(kind, base * 10)
        return b.build()

    seg = make(100)
    append(seg, txn(100, 1, 0, "a", "b"))
    append(seg, txn(102, 2, 0, "c", "d"))
    append(seg, records(104, "e", "f"))
    append(seg, marker(106, 2, ControlRecordType.ABORT))
    append(seg, marker(107, 1, ControlRecordType.COMMIT))

    psm = ProducerStateManager(tmp_path / "psm")
    seg.recover(psm)
    assert psm.map_end_offset == 108
    (aborted,) = seg.txn_index.all_aborted_txns()
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset,
            aborted.last_stable_offset) == (2, 102, 106, 100)

    # again, with pid 2's transaction begun in an earlier segment at offset 75
    psm = ProducerStateManager(tmp_path / "psm2")
    psm.update_from_recovered_batch(RecordBatch(txn(75, 2, 0, "z")))
    seg.recover(psm)
    (aborted,) = seg.txn_index.all_aborted_txns()
    assert (aborted.producer_id, aborted.first_offset, aborted.last_offset,
            aborted.last_stable_offset) == (2, 75, 106, 100)
    assert psm.map_end_offset == 108


def test_append_rejects_partial_batches_before_writing(make: SegFactory) -> None:
    from tidelog.records import CorruptRecordError

    seg = make(0)
    good = records(0, "a")
    for bad in (good[:-1], good + good[:30], good + b"\x00" * 70):
        with pytest.raises(CorruptRecordError):
            seg.append(0, 0, 0, bad)
        assert seg.size == 0 and seg.log.path.stat().st_size == 0
    seg.append(1, 10, 1, good + records(1, "b"))  # several whole batches are fine
    assert batch_offsets(seg) == [0, 1]


def test_recovery_of_preallocated_segment_after_crash(make: SegFactory) -> None:
    """A crash leaves the preallocated zeros: reopening sees them, recovery cuts them off."""
    seg = make(0, preallocate=True, init_file_size=64 * 1024)
    data = fill(seg, 20)
    seg.close_handlers()  # crash: no trim of the .log or the indexes
    reopened = make(0)
    assert reopened.size == 64 * 1024
    assert reopened.offset_index.entries == reopened.offset_index.max_entries  # zeros count
    assert reopened.recover() == 64 * 1024 - sum(map(len, data))
    assert reopened.log.path.stat().st_size == sum(map(len, data))
    assert batch_offsets(reopened) == list(range(20))
    assert_all_lookups(reopened, 20)


def test_read_with_max_position_before_batch(make: SegFactory) -> None:
    seg = make(0)
    first = records(0, "a")
    append(seg, first)
    append(seg, records(1, "b"))
    read = seg.read(1, 1000, max_position=len(first))  # the bound ends where the batch starts
    assert read is not None and read.records.size == 0
    assert read.fetch_offset_metadata == LogOffsetMetadata(1, 0, len(first))


def test_multi_batch_append_indexes_each_crossing_batch(make: SegFactory) -> None:
    """A follower append of several batches indexes them as if appended one by one."""
    batches = [records(i, "v" * 40) for i in range(6)]
    one_by_one, together = make(0, index_interval_bytes=100), make(100, index_interval_bytes=100)
    for b in batches:
        append(one_by_one, b)
    shifted = b"".join(records(100 + i, "v" * 40, ts=i * 10) for i in range(6))
    together.append(105, 50, 105, shifted)
    rel = [(o - 0, p) for o, p in (one_by_one.offset_index.entry(i) for i in range(one_by_one.offset_index.entries))]
    rel2 = [(o - 100, p) for o, p in (together.offset_index.entry(i) for i in range(together.offset_index.entries))]
    assert rel == rel2 and len(rel) >= 2
    assert together.max_timestamp_so_far == 50 and together.shallow_offset_of_max_timestamp_so_far == 105


def test_largest_timestamp_falls_back_to_mtime(make: SegFactory) -> None:
    seg = make(0)
    append(seg, records(0, "a", ts=-1))
    seg.set_last_modified(1_234_567_000)
    assert seg.max_timestamp_so_far == -1
    assert seg.largest_timestamp == 1_234_567_000
    append(seg, records(1, "b", ts=99))
    assert seg.largest_timestamp == 99


def test_append_from_file_in_chunks(tmp_path: Path, make: SegFactory) -> None:
    src = FileRecords.open(tmp_path / "src.log")
    data = [records(i, "x" * 300_000) for i in range(8)]  # 2.4 MB: several 1 MiB chunks
    for d in data:
        src.append(d)
    seg = make(0)
    assert seg.append_from_file(src, 0) == src.size_in_bytes
    assert [bytes(b.buf) for b in seg.log.batches(validate=True)] == data
    assert seg.max_timestamp_so_far == 70 and seg.read_next_offset() == 8
    src.close_handlers()


def test_reads_during_appends_see_only_whole_batches(make: SegFactory) -> None:
    """Readers run without the Log's lock (as fetches do): the size moves only after a
    write completes, and index entries only point at written batches."""
    import threading

    seg = make(0, index_interval_bytes=500, max_index=1 << 20)
    n = 1000
    done = threading.Event()
    errors: list[BaseException] = []
    reads = 0

    def writer() -> None:
        try:
            for i in range(n):
                append(seg, records(i, "v" * (i % 300)))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    rng = random.Random(5)
    while not done.is_set() or reads < 50:
        target = rng.randrange(n)
        info = seg.read(target, 1 << 20)
        if info is None:
            continue
        got = [b.base_offset for b in info.records.batches(validate=True)]
        assert got == list(range(got[0], got[0] + len(got))) and got[0] <= target
        assert sum(b.size_in_bytes for b in info.records.batches()) == info.records.size
        reads += 1
    t.join()
    assert not errors and seg.read_next_offset() == n


KAFKA_EXAMPLE = bytes.fromhex(  # reference 1.6: key "k", value "v", timestamp 1000, CRC 716a6189
    "0000000000000000" "0000003a" "00000000" "02" "716a6189" "0000" "00000000"
    "00000000000003e8" "00000000000003e8" "ffffffffffffffff" "ffff" "ffffffff" "00000001"
    "10" "00" "00" "00" "02" "6b" "02" "76" "00"
)


def test_reads_the_reference_segment_bytes(tmp_path: Path) -> None:
    """A `.log` written byte-for-byte from Kafka's worked example opens, recovers and reads."""
    (tmp_path / "00000000000000000000.log").write_bytes(KAFKA_EXAMPLE)
    seg = LogSegment.open(tmp_path, 0, SegmentConfig(), ManualClock())
    assert len(KAFKA_EXAMPLE) == 70
    assert seg.recover() == 0 and seg.read_next_offset() == 1
    read = seg.read(0, 100)
    assert read is not None and read.records.read() == KAFKA_EXAMPLE
    (rec,) = [r for b in read.records.batches(validate=True) for r in b]
    assert (rec.offset, rec.timestamp, rec.key, rec.value) == (0, 1000, b"k", b"v")
    found = seg.find_offset_by_timestamp(1000)
    assert found is not None and (found.timestamp, found.offset) == (1000, 0)
    seg.close()
