"""Index rebuilds write their entries once (AbstractIndex.deferred_writes), not one open each.

Recovery appends thousands of entries; each used to open the index file for its pwrite. The
deferred run must leave the same bytes, open each index file a bounded number of times, and
on a failed write keep memory no ahead of the file.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.records import RecordBatchBuilder
from tidelog.storage.index import abstract_index
from tidelog.storage.index.offset_index import OffsetIndex
from tidelog.storage.segment import LogSegment, SegmentConfig
from tidelog.util.clock import ManualClock


def batch(offset: int, ts: int) -> bytes:
    b = RecordBatchBuilder(base_offset=offset)
    b.append(ts, None, b"v" * 40)
    return b.build()


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[LogSegment]:
    cfg = SegmentConfig(index_interval_bytes=1, segment_index_bytes=100_000)
    seg = LogSegment.open(tmp_path, 0, cfg, ManualClock())
    for i in range(500):
        data = batch(i, 1000 + i)
        seg.append(i, 1000 + i, i, data)
    yield seg
    seg.close_handlers()


def count_opens(monkeypatch: pytest.MonkeyPatch, suffix: str) -> list[str]:
    opened: list[str] = []
    real_open = os.open

    def spy(path: object, flags: int, mode: int = 0o777) -> int:
        if str(path).endswith(suffix):
            opened.append(str(path))
        return real_open(path, flags, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(abstract_index.os, "open", spy)
    return opened


def test_recovery_rebuilds_the_same_bytes_with_one_write_per_index(
    segment: LogSegment, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment.flush()
    expected = (segment.offset_index.path.read_bytes()[: segment.offset_index.size_in_bytes],
                segment.time_index.path.read_bytes()[: segment.time_index.size_in_bytes])
    assert len(expected[0]) == 8 * 499 and len(expected[1]) == 12 * 499
    index_opens = count_opens(monkeypatch, ".index")
    assert segment.recover() == 0
    # 499 entries rebuilt with one open (the file was loaded before the spy)
    assert len(index_opens) == 1, index_opens
    segment.close()
    assert (segment.offset_index.path.read_bytes(), segment.time_index.path.read_bytes()) == expected


def test_entries_are_invisible_in_the_file_until_the_block_ends(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0, max_index_size=800)
    idx.append(0, 0)
    with idx.deferred_writes():
        idx.append(5, 100)
        idx.append(9, 200)
        assert idx.entries == 3 and idx.lookup(9).position == 200  # memory has them
        assert (tmp_path / "0.index").read_bytes()[8:24] == bytes(16)  # the file not yet
    assert (tmp_path / "0.index").read_bytes()[8:24] == bytes.fromhex(
        "00000005" "00000064" "00000009" "000000c8")


def test_truncation_inside_the_block_rewrites_from_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    idx = OffsetIndex(path, 0, max_index_size=800)
    for i in range(4):
        idx.append(i, i * 10)
    with idx.deferred_writes():
        idx.truncate_to(2)
        idx.append(7, 70)
    idx.trim()
    idx.close_handler()
    again = OffsetIndex(path, 0, max_index_size=800)
    assert [again.entry(i) for i in range(again.entries)] == [(0, 0), (1, 10), (7, 70)]


def test_a_failed_write_drops_the_unwritten_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0, max_index_size=800)
    idx.append(0, 0)

    def full(fd: int, data: bytes, position: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as e, idx.deferred_writes():
        idx.append(3, 30)
        monkeypatch.setattr(abstract_index.os, "pwrite", full)
    assert e.value.errno == errno.ENOSPC
    assert idx.entries == 1 and idx.last_offset == 0
    monkeypatch.undo()
    idx.append(4, 40)  # appends continue from what the file holds
    assert idx.lookup(4) == (4, 40)


def test_an_exception_in_the_block_still_writes_the_entries(tmp_path: Path) -> None:
    path = tmp_path / "0.index"
    idx = OffsetIndex(path, 0, max_index_size=800)
    with pytest.raises(ValueError, match="boom"), idx.deferred_writes():
        idx.append(2, 20)
        raise ValueError("boom")
    assert path.read_bytes()[:8] == bytes.fromhex("0000000200000014")


def test_nested_blocks_are_refused(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "0.index", 0, max_index_size=800)
    nested = pytest.raises(RuntimeError, match="nested")
    with idx.deferred_writes(), nested, idx.deferred_writes():
        pass
